#!/usr/bin/env node
// Run by `npm start` and `npm test` (prestart, pretest) after `npm run build`, so that a clone needs no
// set-up step besides `npm ci`: on a machine with a Hopper GPU, builds the CUDA kernels when they are
// missing (or were built from other sources than kernels/ holds now) and nvcc can, or says what is
// missing when it cannot. Without a Hopper GPU it does nothing: the kernels could not run, the CPU
// reference needs none, and CI (nvcc, no GPU) builds them itself.
import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MIN_NVCC, parseNvccRelease, staleKernels } from "./buildKernels.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const NEED = `nvcc >= ${MIN_NVCC.major}.${MIN_NVCC.minor}`;

/**
 * @typedef {{ hopper: true, name: string } | { hopper: false, reason: string }} GpuState
 * @typedef {{ found: true, command: string, release?: { major: number, minor: number } } | { found: false, command: string, why: string }} NvccState
 * @typedef {{ action: "none" } | { action: "build", line: string } | { action: "warn", message: string }} KernelSetup
 */

/**
 * What `npm start` / `npm test` do about the kernels before they run: nothing, build them (announced by
 * one line), or warn what is missing. The GPU and the kernels are looked at first, so that a machine
 * without a Hopper GPU never needs nvcc.
 * @param {{ kernels: "built" | "missing" | "stale", kernelDir: string, gpu: GpuState, nvcc?: NvccState }} s
 *   kernels: "stale" when kernels/ changed since they were built; nvcc: needed only when the answer
 *   depends on it (a Hopper GPU, kernels not built).
 * @returns {KernelSetup}
 */
export function decideKernelSetup({ kernels, kernelDir, gpu, nvcc }) {
  if (kernels === "built" || !gpu.hopper) return { action: "none" };
  const what =
    kernels === "missing"
      ? `the CUDA kernels are not built (${path.join(kernelDir, "manifest.json")} is missing)`
      : `the CUDA kernels in ${kernelDir} were built from other sources than kernels/ holds now`;
  const remedy =
    `Building them from a clone needs ${NEED} (the CUDA toolkit; NVCC=/path/to/nvcc if it is not on PATH); ` +
    "or install the published package (npm install flashmla-ts), which ships them compiled.";
  if (nvcc === undefined || !nvcc.found) {
    const why = nvcc?.why ?? `'nvcc' not found`;
    return { action: "warn", message: `flashmla-ts: ${gpu.name} is here, but ${what} and there is no nvcc to build them (${why}). ${remedy}` };
  }
  const r = nvcc.release;
  if (r !== undefined && (r.major < MIN_NVCC.major || (r.major === MIN_NVCC.major && r.minor < MIN_NVCC.minor))) {
    return { action: "warn", message: `flashmla-ts: ${gpu.name} is here, but ${what} and ${nvcc.command} is CUDA ${r.major}.${r.minor}, too old to build them. ${remedy}` };
  }
  const version = r === undefined ? nvcc.command : `nvcc ${r.major}.${r.minor}`;
  const verb = kernels === "missing" ? "building the CUDA kernels" : "rebuilding the CUDA kernels (kernels/ changed since they were built)";
  return { action: "build", line: `flashmla-ts: ${verb} for the ${gpu.name} (${version}, ~1–2 min)…` };
}

/** Whether device `ordinal` is a Hopper GPU, through the package's own driver loader (no nvidia-smi). */
export async function probeGpu(ordinal) {
  const { driverAvailable } = await import(pathToFileURL(path.join(root, "dist/src/driver/loadDriver.js")).href);
  const driver = driverAvailable();
  if (!driver.ok) return { hopper: false, reason: driver.reason };
  try {
    const { Device } = await import(pathToFileURL(path.join(root, "dist/src/runtime/Device.js")).href);
    const device = Device.get(ordinal);
    return device.isHopper ? { hopper: true, name: device.name } : { hopper: false, reason: `${device.name} is not a Hopper GPU` };
  } catch (e) {
    return { hopper: false, reason: e instanceof Error ? e.message : String(e) };
  }
}

function probeNvcc() {
  const command = process.env.NVCC ?? "nvcc";
  try {
    const text = execFileSync(command, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    const release = parseNvccRelease(text);
    return release === undefined ? { found: true, command } : { found: true, command, release };
  } catch (e) {
    return { found: false, command, why: e?.code === "ENOENT" ? `'${command}' not found` : `'${command} --version' failed` };
  }
}

/** Runs buildKernels with its per-kernel report held back, shown only if the build fails. */
function build() {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(root, "scripts/buildKernels.mjs")], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    child.on("close", (code) => resolve({ ok: code === 0, output }));
  });
}

async function main() {
  const { config } = await import(pathToFileURL(path.join(root, "dist/src/config.js")).href);
  const manifestThere = existsSync(path.join(config.kernelDir, "manifest.json"));
  const gpu = await probeGpu(config.deviceOrdinal);
  let kernels = manifestThere ? "built" : "missing";
  let nvcc;
  if (gpu.hopper) {
    // Only here: hashing kernels/ costs little, but a machine without a Hopper GPU has no use for it.
    if (manifestThere && staleKernels(config.kernelDir).length > 0) kernels = "stale";
    if (kernels !== "built") nvcc = probeNvcc();
  }
  const setup = decideKernelSetup({ kernels, kernelDir: config.kernelDir, gpu, nvcc });
  if (setup.action === "none") return;
  if (setup.action === "warn") {
    process.stderr.write(`${setup.message}\n`);
    return;
  }
  process.stderr.write(`${setup.line}\n`);
  const t0 = Date.now();
  const result = await build();
  if (!result.ok) {
    process.stderr.write(`${result.output}\nflashmla-ts: the kernel build failed (above); npm run build:kernels runs it again.\n`);
    process.exit(1);
  }
  process.stderr.write(`flashmla-ts: kernels built in ${((Date.now() - t0) / 1000).toFixed(0)} s (${config.kernelDir})\n`);
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
