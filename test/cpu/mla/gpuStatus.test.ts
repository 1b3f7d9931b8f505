import { after, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { gpuStatus, kernelStatus, type GpuStatus } from "../../../src/mla/gpuStatus.js";
import { buildFakeLibcuda } from "../../helpers/fakeLibcuda.js";
import { REGISTRY_CUBINS, writeFakeKernelDir } from "../../helpers/fakeKernelDir.js";

// gpuStatus() must answer, never throw, for every machine a user has: no driver, a driver without a
// device, a GPU that is not a Hopper, a Hopper without kernels, and a ready one. The driver loader
// keeps its verdict for the life of a process, so each machine is a child process with
// FLASHMLA_LIBCUDA pointing at a missing library or at a fake libcuda built here with the C compiler.

// dist/test/cpu/mla -> dist/src
const srcDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src");
const mod = (p: string) => JSON.stringify(pathToFileURL(path.join(srcDir, p)).href);
const tmp = mkdtempSync(path.join(os.tmpdir(), "flashmla-gpustatus-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

const kernelDir = (name: string, names: readonly string[], damaged?: string) => writeFakeKernelDir(path.join(tmp, name), names, damaged);

/** What a fresh process with this environment gets from Device.count() and gpuStatus(ordinal). */
function probe(env: Record<string, string>, ordinal: number | "default" = 0): { count: number | string; status: GpuStatus } {
  const script = `
    const { Device } = await import(${mod("runtime/Device.js")});
    const { gpuStatus } = await import(${mod("mla/gpuStatus.js")});
    let count;
    try { count = Device.count(); } catch (e) { count = e.name + ": " + e.message; }
    process.stdout.write(JSON.stringify({ count, status: gpuStatus(${ordinal === "default" ? "" : ordinal}) }));
  `;
  const stdout = execFileSync(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, FLASHMLA_KERNEL_DIR: readyDir, ...env }, encoding: "utf8" });
  return JSON.parse(stdout);
}

const readyDir = kernelDir("ready", [...REGISTRY_CUBINS, "ceilings"]);
const fakeLib = buildFakeLibcuda(path.join(tmp, "driver"));
const needsCompiler = fakeLib === undefined && "no C compiler (cc) to build the fake libcuda";

test("kernelStatus() is present only when every registry cubin is listed and matches its sha256", () => {
  assert.deepEqual(kernelStatus(readyDir), { dir: readyDir, present: true, modules: [...REGISTRY_CUBINS, "ceilings"] });
  const missing = kernelStatus(path.join(tmp, "nowhere"));
  assert.equal(missing.present, false);
  assert.deepEqual(missing.modules, []);
  assert.match(missing.problem!, /manifest\.json not found: the CUDA kernels are not built; run npm run build:kernels$/);

  const partial = kernelDir("partial", REGISTRY_CUBINS.filter((n) => n !== "combine" && n !== "sched_meta"));
  assert.equal(kernelStatus(partial).present, false);
  assert.equal(kernelStatus(partial).problem, `${path.join(partial, "manifest.json")} lists no sched_meta, combine (the library launches them); run npm run build:kernels`);

  const damaged = kernelDir("damaged", REGISTRY_CUBINS, "combine");
  const d = kernelStatus(damaged);
  assert.equal(d.present, false);
  assert.ok(!d.modules.includes("combine") && d.modules.includes("sched_meta"));
  assert.match(d.problem!, /combine\.cubin does not match manifest\.json .*stale or damaged; run npm run build:kernels$/);

  // A damaged module the library does not launch (a benchmark cubin) is left out of modules only.
  const bench = kernelDir("bench-damaged", [...REGISTRY_CUBINS, "ceilings"], "ceilings");
  assert.deepEqual(kernelStatus(bench), { dir: bench, present: true, modules: REGISTRY_CUBINS });
});

test("gpuStatus() names a bad ordinal or option as an ArgumentError", () => {
  const cases: Array<[() => unknown, string]> = [
    [() => gpuStatus(-1), "deviceOrdinal"],
    [() => gpuStatus(1.5), "deviceOrdinal"],
    [() => gpuStatus("0" as unknown as number), "deviceOrdinal"],
    [() => gpuStatus(0, null as unknown as object), "options"],
    [() => gpuStatus(0, { kernelDir: 3 as unknown as string }), "options.kernelDir"],
  ];
  for (const [fn, argument] of cases) {
    assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.fn === "gpuStatus" && e.argument === argument, argument);
  }
});

test("without libcuda: Device.count() is 0 and gpuStatus() says no-driver with the remedy, kernels still reported", () => {
  const missing = path.join(tmp, "no-such-dir", "libcuda.so.1");
  const { count, status } = probe({ FLASHMLA_LIBCUDA: missing });
  assert.equal(count, 0);
  assert.equal(status.ok, false);
  if (status.ok) return;
  assert.equal(status.reason, "no-driver");
  assert.equal(
    status.message,
    `${missing} not found: no NVIDIA driver on this machine; set FLASHMLA_LIBCUDA=/path/to/libcuda.so.1 if it is elsewhere; ` +
      "the GPU path needs the NVIDIA driver for CUDA 12.8 or newer (libcuda.so.1) and a Hopper GPU; the CPU reference (mlaDecodeReference) works without a GPU",
  );
  assert.equal(status.kernels.present, true);
  assert.equal(status.kernels.dir, readyDir);
});

test("a FLASHMLA_DEVICE that is not an ordinal is an answer (no-device), not a throw", { skip: needsCompiler }, () => {
  const { status } = probe({ FLASHMLA_LIBCUDA: fakeLib!, FLASHMLA_DEVICE: "first" }, "default");
  assert.deepEqual(status.ok ? undefined : [status.reason, status.message], [
    "no-device",
    "FLASHMLA_DEVICE does not name a device ordinal (it reads as NaN); set it to 0 or another device's ordinal, or unset it",
  ]);
});

test("a driver that finds no device: count 0 and no-device", { skip: needsCompiler }, () => {
  const { count, status } = probe({ FLASHMLA_LIBCUDA: fakeLib!, FAKE_CUDA_INIT: "100" });
  assert.equal(count, 0);
  assert.deepEqual(status.ok ? undefined : [status.reason, status.message], [
    "no-device",
    "the NVIDIA driver found no CUDA device (CUDA_ERROR_NO_DEVICE); check nvidia-smi and CUDA_VISIBLE_DEVICES; the CPU reference (mlaDecodeReference) works without a GPU",
  ]);
});

test("a driver that fails to initialise: Device.count() throws its CudaError, gpuStatus() says no-driver", { skip: needsCompiler }, () => {
  const { count, status } = probe({ FLASHMLA_LIBCUDA: fakeLib!, FAKE_CUDA_INIT: "35" });
  assert.equal(count, "CudaError: cuInit failed: CUDA_ERROR_INSUFFICIENT_DRIVER (35): fake driver");
  assert.equal(status.ok ? undefined : status.reason, "no-driver");
  assert.match(status.ok ? "" : status.message, /^the NVIDIA driver did not initialise: cuInit failed: CUDA_ERROR_INSUFFICIENT_DRIVER \(35\)/);
});

test("an ordinal past the devices: no-device naming how many there are", { skip: needsCompiler }, () => {
  const { count, status } = probe({ FLASHMLA_LIBCUDA: fakeLib!, FAKE_CUDA_COUNT: "2" }, 2);
  assert.equal(count, 2);
  assert.equal(status.ok ? undefined : status.reason, "no-device");
  assert.match(status.ok ? "" : status.message, /^no CUDA device 2: the driver sees 2 CUDA device\(s\), ordinals 0 to 1; pass another ordinal or set FLASHMLA_DEVICE;/);
});

test("a GPU that is not a Hopper: not-hopper with the device described", { skip: needsCompiler }, () => {
  const { status } = probe({ FLASHMLA_LIBCUDA: fakeLib!, FAKE_CUDA_CC: "8.0", FAKE_CUDA_NAME: "NVIDIA A100-SXM4-80GB" });
  assert.equal(status.ok, false);
  if (status.ok || status.reason !== "not-hopper") return assert.fail(JSON.stringify(status));
  assert.deepEqual(status.device, { ordinal: 0, name: "NVIDIA A100-SXM4-80GB", computeCapability: "8.0", smCount: 132, memoryBytes: 2 ** 37, driverVersion: "12.8" });
  assert.match(status.message, /^NVIDIA A100-SXM4-80GB has compute capability 8\.0 \(an older architecture\); the flashmla-ts kernels are built for sm_90a/);
});

test("a Hopper without kernels: no-kernels with the kernel folder's problem as the message", { skip: needsCompiler }, () => {
  const dir = path.join(tmp, "empty");
  const { status } = probe({ FLASHMLA_LIBCUDA: fakeLib!, FLASHMLA_KERNEL_DIR: dir });
  if (status.ok || status.reason !== "no-kernels") return assert.fail(JSON.stringify(status));
  assert.equal(status.message, `${path.join(dir, "manifest.json")} not found: the CUDA kernels are not built; run npm run build:kernels`);
  assert.equal(status.kernels.present, false);
  assert.equal(status.device.computeCapability, "9.0");
});

test("a Hopper with its kernels: ok, the device and the kernels", { skip: needsCompiler }, () => {
  const { count, status } = probe({ FLASHMLA_LIBCUDA: fakeLib! });
  assert.equal(count, 1);
  assert.deepEqual(status, {
    ok: true,
    device: { ordinal: 0, name: "Fake H200", computeCapability: "9.0", smCount: 132, memoryBytes: 2 ** 37, driverVersion: "12.8" },
    kernels: { dir: readyDir, present: true, modules: [...REGISTRY_CUBINS, "ceilings"] },
  });
});
