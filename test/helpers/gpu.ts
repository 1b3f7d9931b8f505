import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
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
let noticed = false;

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
 * otherwise the skip message. The reason in full goes to stderr once per test run (see
 * {@link firstInRun}); each skipped test carries only its first clause.
 */
function unavailable(ctx: { ok: false; reason: string }): { fail: string } | { skip: string } {
  if (config.requireGpu) return { fail: `FLASHMLA_REQUIRE_GPU=1 but the GPU tests cannot run: ${ctx.reason}` };
  if (!noticed) {
    noticed = true;
    if (firstInRun()) {
      process.stderr.write(
        `WARNING: flashmla-ts GPU tests SKIPPED (every GPU test of this run): no GPU: ${ctx.reason}. ` +
          `FLASHMLA_REQUIRE_GPU=1 (npm run test:gpu) makes this a failure.\n`,
      );
    }
  }
  return { skip: `SKIPPED: no GPU: ${ctx.reason.split(";")[0]}` };
}

/**
 * Whether this process is the first of its test run to find no GPU, so the warning is printed once
 * per `npm test` rather than once per file: \`node --test\` runs every file in a child process of its
 * own, so "once per process" would be thirty times. The children of one run share their parent, the
 * runner; the first to create a marker named after the runner's pid and start time (an exclusive
 * create, so two files running at once cannot both win) prints the notice. The start time keeps a
 * recycled pid from matching a marker a past run left behind, and markers of runners that have
 * exited are removed. A file run on its own (\`node file.js\`, no NODE_TEST_CONTEXT) is its own run;
 * when the marker cannot be written the notice is printed, since one too many beats none.
 */
function firstInRun(): boolean {
  if (process.env.NODE_TEST_CONTEXT === undefined) return true;
  try {
    const dir = path.join(os.tmpdir(), `flashmla-ts-gpu-notice-${os.userInfo().uid}`);
    mkdirSync(dir, { recursive: true });
    removeStaleMarkers(dir);
    writeFileSync(path.join(dir, `${process.ppid}-${startTime(process.ppid)}`), "", { flag: "wx" });
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== "EEXIST";
  }
}

/** The start time of process `pid` in clock ticks since boot (Linux), or "" where /proc cannot say. */
function startTime(pid: number): string {
  try {
    // Field 22 of /proc/<pid>/stat; the command name (field 2) may hold spaces, so count after its ")".
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? "";
  } catch {
    return "";
  }
}

function removeStaleMarkers(dir: string): void {
  for (const name of readdirSync(dir)) {
    const pid = Number(name.split("-")[0]);
    if (!Number.isSafeInteger(pid) || pid <= 0) continue;
    try {
      process.kill(pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ESRCH") rmSync(path.join(dir, name), { force: true });
    }
  }
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
