import { describe, test, type TestContext } from "node:test";
import { config } from "../../src/config.js";
import { driverAvailable } from "../../src/driver/loadDriver.js";
import { Device } from "../../src/runtime/Device.js";
import { readKernelManifest, readVerifiedCubin } from "../../src/runtime/readVerifiedCubin.js";

/** What a GPU test needs besides a Hopper GPU. */
export interface GpuTestOptions {
  /** Also require the built, verified cubins in config.kernelDir. @default true */
  needsKernels?: boolean;
}

/** The device GPU tests run on, or why they cannot run. */
export type GpuTestContext = { ok: true; device: Device } | { ok: false; reason: string };

const contexts = new Map<boolean, GpuTestContext>();
let warned = false;

/**
 * Whether GPU tests can run here: a driver, device `config.deviceOrdinal` (FLASHMLA_DEVICE) with
 * compute capability 9.0 and, unless `needsKernels: false`, cubins that match their manifest.
 * Probed once per process; never throws.
 */
export function gpuTestContext(options: GpuTestOptions = {}): GpuTestContext {
  const needsKernels = options.needsKernels ?? true;
  let ctx = contexts.get(needsKernels);
  if (!ctx) {
    ctx = probe(needsKernels);
    contexts.set(needsKernels, ctx);
  }
  return ctx;
}

function probe(needsKernels: boolean): GpuTestContext {
  const driver = driverAvailable();
  if (!driver.ok) return { ok: false, reason: driver.reason };
  let device: Device;
  try {
    device = Device.get(config.deviceOrdinal);
  } catch (e) {
    return { ok: false, reason: e instanceof Error ? e.message : String(e) };
  }
  if (!device.isHopper) {
    const cc = device.computeCapability;
    return { ok: false, reason: `${device.name} has compute capability ${cc.major}.${cc.minor}; the kernels need 9.0 (Hopper)` };
  }
  if (needsKernels) {
    try {
      for (const { name } of readKernelManifest(config.kernelDir)) readVerifiedCubin(config.kernelDir, name);
    } catch (e) {
      return { ok: false, reason: e instanceof Error ? e.message : String(e) };
    }
  }
  return { ok: true, device };
}

/**
 * When `ctx` is not usable: with FLASHMLA_REQUIRE_GPU=1 the error message for a failing test,
 * otherwise the skip message (after one warning line on stderr per process).
 */
function unavailable(ctx: { ok: false; reason: string }): { fail: string } | { skip: string } {
  if (config.requireGpu) return { fail: `FLASHMLA_REQUIRE_GPU=1 but the GPU tests cannot run: ${ctx.reason}` };
  if (!warned) {
    warned = true;
    process.stderr.write(`WARNING: flashmla-ts GPU tests SKIPPED: no GPU: ${ctx.reason}\n`);
  }
  return { skip: `SKIPPED: no GPU: ${ctx.reason}` };
}

/**
 * `describe()` for tests that need the GPU: `fn` gets the Device. Without a usable Hopper GPU the
 * suite is registered as skipped with the reason, or as a failing test when FLASHMLA_REQUIRE_GPU=1.
 */
export function describeGpu(title: string, fn: (device: Device) => void | Promise<void>, options: GpuTestOptions = {}): void {
  const ctx = gpuTestContext(options);
  if (ctx.ok) {
    describe(title, () => fn(ctx.device));
    return;
  }
  const verdict = unavailable(ctx);
  if ("fail" in verdict) {
    test(title, () => {
      throw new Error(verdict.fail);
    });
  } else {
    // A skipped test (not a skipped suite) so the runner's "skipped" count shows it.
    test(title, { skip: verdict.skip }, () => {});
  }
}

/**
 * `test()` for a test that needs the GPU: `fn` gets the test context and the Device. Skips or
 * fails like `describeGpu` when there is no usable Hopper GPU.
 */
export function testGpu(title: string, fn: (t: TestContext, device: Device) => void | Promise<void>, options: GpuTestOptions = {}): void {
  const ctx = gpuTestContext(options);
  if (ctx.ok) {
    test(title, (t) => fn(t, ctx.device));
    return;
  }
  const verdict = unavailable(ctx);
  if ("fail" in verdict) {
    test(title, () => {
      throw new Error(verdict.fail);
    });
  } else {
    test(title, { skip: verdict.skip }, () => {});
  }
}
