import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// dist/test/cpu/driver -> dist/src
const srcDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src");
const mod = (p: string) => JSON.stringify(pathToFileURL(path.join(srcDir, p)).href);

/**
 * Runs the loader in a fresh process (the loader memoises its outcome for the life of a process)
 * with FLASHMLA_LIBCUDA set, and returns what it observed.
 */
function probeWithLibcuda(libcuda: string): {
  available: { ok: boolean; reason?: string };
  /** Device.count()'s answer, or the error it threw. */
  count: number | { name: string; noGpu: boolean; message: string };
  sameErrorTwice: boolean;
  calls: Record<string, { name: string; noGpu: boolean; message: string } | "ok">;
} {
  const script = `
    const { driverAvailable, loadDriver } = await import(${mod("driver/loadDriver.js")});
    const { NoGpuError } = await import(${mod("errors/NoGpuError.js")});
    const { Device } = await import(${mod("runtime/Device.js")});
    const { DeviceBuffer } = await import(${mod("runtime/DeviceBuffer.js")});
    const { Stream } = await import(${mod("runtime/Stream.js")});
    const { Event } = await import(${mod("runtime/Event.js")});
    const attempt = (fn) => { try { fn(); return "ok"; } catch (e) { return { name: e.name, noGpu: e instanceof NoGpuError, message: e.message }; } };
    const errorOf = () => { try { loadDriver(); } catch (e) { return e; } };
    const out = {
      available: driverAvailable(),
      count: (() => { try { return Device.count(); } catch (e) { return { name: e.name, noGpu: e instanceof NoGpuError, message: e.message }; } })(),
      sameErrorTwice: errorOf() === errorOf(),
      calls: {
        "Device.get": attempt(() => Device.get()),
        "DeviceBuffer.alloc": attempt(() => DeviceBuffer.alloc(16)),
        "Stream.create": attempt(() => Stream.create()),
        "Event.create": attempt(() => Event.create()),
      },
    };
    process.stdout.write(JSON.stringify(out));
  `;
  const stdout = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, FLASHMLA_LIBCUDA: libcuda },
    encoding: "utf8",
  });
  return JSON.parse(stdout);
}

test("driverAvailable() reports a missing libcuda with the remedy, Device.count() is 0, and every GPU call throws NoGpuError", () => {
  const missing = "/nonexistent/flashmla-test/libcuda.so.1";
  const r = probeWithLibcuda(missing);
  // A program asks how many GPUs there are before it opens one; without a driver the answer is none.
  assert.equal(r.count, 0);
  assert.equal(r.available.ok, false);
  assert.equal(
    r.available.reason,
    `${missing} not found: no NVIDIA driver on this machine; set FLASHMLA_LIBCUDA=/path/to/libcuda.so.1 if it is elsewhere; the CPU reference (mlaDecodeReference) works without a GPU`,
  );
  assert.ok(r.sameErrorTwice, "the failure is memoised");
  for (const [call, outcome] of Object.entries(r.calls)) {
    assert.notEqual(outcome, "ok", call);
    if (outcome === "ok") continue;
    assert.equal(outcome.name, "NoGpuError", call);
    assert.ok(outcome.noGpu, call);
    assert.equal(outcome.message, r.available.reason, call);
  }
});

test("driverAvailable() reports a file that is not a shared library as not loadable", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-libcuda-"));
  const fake = path.join(dir, "libcuda.so.1");
  writeFileSync(fake, "not an ELF file\n");
  const r = probeWithLibcuda(fake);
  assert.equal(r.available.ok, false);
  assert.match(r.available.reason!, new RegExp(`^${fake.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} could not be loaded \\(`));
  assert.match(r.available.reason!, /set FLASHMLA_LIBCUDA=/);
  assert.equal(r.count, 0);
});

test("driverAvailable() reports a library without the CUDA driver functions", { skip: process.platform !== "linux" && "needs glibc's libc.so.6" }, () => {
  const r = probeWithLibcuda("libc.so.6");
  assert.equal(r.available.ok, false);
  assert.match(r.available.reason!, /^libc\.so\.6 has no cu\w+: the NVIDIA driver is too old/);
  assert.equal((r.calls["Device.get"] as { noGpu: boolean }).noGpu, true);
  assert.equal(r.count, 0, "a driver too old to use counts as none");
});
