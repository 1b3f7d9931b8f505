import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { config } from "../../../src/config.js";

// scripts/ensureKernels.mjs (what npm start and npm test do about the kernels in a clone) and the
// helpers it shares with scripts/buildKernels.mjs. The scripts are plain ESM outside the TypeScript
// build, so they are imported from the clone and typed here.

type GpuState = { hopper: true; name: string } | { hopper: false; reason: string };
type NvccState = { found: true; command: string; release?: { major: number; minor: number } } | { found: false; command: string; why: string };
type KernelSetup = { action: "none" } | { action: "build"; line: string } | { action: "warn"; message: string };
interface EnsureKernels {
  probeGpu(ordinal: number): Promise<GpuState>;
  decideKernelSetup(s: { kernels: "built" | "missing" | "stale"; kernelDir: string; gpu: GpuState; nvcc?: NvccState }): KernelSetup;
}
interface BuildKernels {
  MIN_NVCC: { major: number; minor: number };
  isTestOnly(src: string): boolean;
  parseNvccRelease(text: string): { major: number; minor: number } | undefined;
  kernelUnits(dir?: string): Array<{ src: string; name: string; dir: string; sourceSha256: string }>;
  staleKernels(dir?: string): string[];
}

const script = (name: string) => pathToFileURL(path.join(config.packageRoot, "scripts", name)).href;
const { decideKernelSetup, probeGpu } = (await import(script("ensureKernels.mjs"))) as EnsureKernels;
const build = (await import(script("buildKernels.mjs"))) as BuildKernels;

const H200: GpuState = { hopper: true, name: "NVIDIA H200" };
const kernelDir = "/clone/dist/kernels";
const nvcc13: NvccState = { found: true, command: "nvcc", release: { major: 13, minor: 0 } };

test("decideKernelSetup(): built kernels, or no Hopper GPU, need nothing (and no nvcc is asked for)", () => {
  assert.deepEqual(decideKernelSetup({ kernels: "built", kernelDir, gpu: H200, nvcc: nvcc13 }), { action: "none" });
  for (const kernels of ["missing", "stale"] as const) {
    assert.deepEqual(decideKernelSetup({ kernels, kernelDir, gpu: { hopper: false, reason: "no NVIDIA driver" } }), { action: "none" });
    assert.deepEqual(decideKernelSetup({ kernels, kernelDir, gpu: { hopper: false, reason: "NVIDIA A100 is not a Hopper GPU" } }), { action: "none" });
  }
});

test("decideKernelSetup(): a Hopper GPU, kernels missing or stale and nvcc >= 12.8 build them, announced by one line", () => {
  const missing = decideKernelSetup({ kernels: "missing", kernelDir, gpu: H200, nvcc: nvcc13 });
  assert.deepEqual(missing, { action: "build", line: "flashmla-ts: building the CUDA kernels for the NVIDIA H200 (nvcc 13.0, ~1–2 min)…" });
  const stale = decideKernelSetup({ kernels: "stale", kernelDir, gpu: H200, nvcc: { found: true, command: "nvcc", release: { major: 12, minor: 8 } } });
  assert.equal(stale.action, "build");
  assert.match((stale as { line: string }).line, /^flashmla-ts: rebuilding the CUDA kernels \(kernels\/ changed since they were built\) for the NVIDIA H200 \(nvcc 12\.8, ~1–2 min\)…$/);
  // An nvcc whose version text is unfamiliar is tried rather than refused.
  const unknown = decideKernelSetup({ kernels: "missing", kernelDir, gpu: H200, nvcc: { found: true, command: "/opt/cuda/bin/nvcc" } });
  assert.match((unknown as { line: string }).line, /\(\/opt\/cuda\/bin\/nvcc, ~1–2 min\)…$/);
});

test("decideKernelSetup(): a Hopper GPU without a usable nvcc says what is missing and both remedies", () => {
  const none = decideKernelSetup({ kernels: "missing", kernelDir, gpu: H200, nvcc: { found: false, command: "nvcc", why: "'nvcc' not found" } });
  assert.equal(none.action, "warn");
  const message = (none as { message: string }).message;
  assert.match(message, /^flashmla-ts: NVIDIA H200 is here, but the CUDA kernels are not built \(\/clone\/dist\/kernels\/manifest\.json is missing\) and there is no nvcc to build them \('nvcc' not found\)\./);
  assert.match(message, /Building them from a clone needs nvcc >= 12\.8 .*or install the published package \(npm install flashmla-ts\), which ships them compiled\.$/);
  const old = decideKernelSetup({ kernels: "stale", kernelDir, gpu: H200, nvcc: { found: true, command: "nvcc", release: { major: 12, minor: 4 } } });
  assert.equal(old.action, "warn");
  assert.match((old as { message: string }).message, /built from other sources than kernels\/ holds now and nvcc is CUDA 12\.4, too old to build them\. Building them from a clone needs nvcc >= 12\.8/);
});

test("buildKernels' helpers: test-only units, nvcc's release, the minimum", () => {
  assert.equal(build.isTestOnly(path.join("testing", "dequant_selftest.cu")), true);
  assert.equal(build.isTestOnly(path.join("bench", "bench_fill.cu")), false);
  assert.equal(build.isTestOnly(path.join("sm90", "decode", "dense", "inst", "fast_bf16.cu")), false);
  assert.deepEqual(build.parseNvccRelease("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.48\nBuild cuda_13.0.r13.0/compiler.36424714_0"), { major: 13, minor: 0 });
  assert.equal(build.parseNvccRelease("something else"), undefined);
  assert.deepEqual(build.MIN_NVCC, { major: 12, minor: 8 });
  const units = build.kernelUnits("/k");
  assert.ok(units.some((u) => u.name === "bench_fill" && u.dir === "/k"));
  assert.ok(units.some((u) => u.name === "dequant_selftest" && u.dir === path.join("/k", "testing")));
  assert.ok(units.every((u) => /^[0-9a-f]{64}$/.test(u.sourceSha256)));
});

test("staleKernels(): a folder matches kernels/ until a unit's entry, source hash or cubin differs", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-stale-"));
  try {
    const units = build.kernelUnits(dir);
    assert.deepEqual(build.staleKernels(dir).sort(), units.map((u) => u.name).sort(), "an empty folder: every unit");
    const write = (folder: string, drop?: string, alter?: string) => {
      const kernels: Record<string, { sourceSha256: string }> = {};
      for (const u of units.filter((x) => x.dir === folder && x.name !== drop)) kernels[u.name] = { sourceSha256: u.name === alter ? "0".repeat(64) : u.sourceSha256 };
      mkdirSync(folder, { recursive: true });
      writeFileSync(path.join(folder, "manifest.json"), JSON.stringify({ kernels }));
    };
    for (const u of units) {
      mkdirSync(u.dir, { recursive: true });
      writeFileSync(path.join(u.dir, `${u.name}.cubin`), "x");
    }
    write(dir);
    write(path.join(dir, "testing"));
    assert.deepEqual(build.staleKernels(dir), []);
    write(dir, "combine", "sched_meta");
    assert.deepEqual(build.staleKernels(dir).sort(), ["combine", "sched_meta"]);
    write(dir);
    rmSync(path.join(dir, "testing", "manifest.json"));
    rmSync(path.join(dir, "bench_fill.cubin"));
    assert.deepEqual(build.staleKernels(dir).sort(), ["bench_fill", ...units.filter((u) => u.dir !== dir).map((u) => u.name)].sort());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("probeGpu(): through the library's driver loader and Device, no Hopper GPU without a driver", async () => {
  const { driverAvailable } = await import("../../../src/driver/loadDriver.js");
  const { Device } = await import("../../../src/runtime/Device.js");
  const gpu = await probeGpu(config.deviceOrdinal);
  const driver = driverAvailable();
  if (!driver.ok) {
    assert.deepEqual(gpu, { hopper: false, reason: driver.reason });
    // What probeGpu reads of a device on a GPU machine, which CI cannot run.
    assert.equal(typeof Device.get, "function");
    assert.equal(typeof Object.getOwnPropertyDescriptor(Device.prototype, "isHopper")?.get, "function");
  } else {
    assert.equal(gpu.hopper, Device.get(config.deviceOrdinal).isHopper);
  }
});

test("ensureKernels.mjs without a GPU does nothing and never runs nvcc, even with the kernels missing", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-ensure-"));
  try {
    const marker = path.join(dir, "nvcc-was-called");
    const stub = path.join(dir, "nvcc");
    writeFileSync(stub, `#!/bin/sh\ntouch '${marker}'\nexit 97\n`);
    chmodSync(stub, 0o755);
    const r = spawnSync(process.execPath, [path.join(config.packageRoot, "scripts", "ensureKernels.mjs")], {
      env: { ...process.env, FLASHMLA_LIBCUDA: "/nonexistent/flashmla-test/libcuda.so.1", FLASHMLA_KERNEL_DIR: path.join(dir, "kernels"), NVCC: stub, PATH: `${dir}:${process.env.PATH ?? ""}` },
      encoding: "utf8",
    });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout + r.stderr, "");
    assert.equal(existsSync(marker), false, "nvcc was run");
    assert.equal(existsSync(path.join(dir, "kernels")), false, "a kernel folder was made");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
