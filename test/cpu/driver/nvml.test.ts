import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { nvmlGpu } from "../../../src/driver/nvml.js";

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

test("nvmlGpu() reports a missing NVML as not available, with the remedy, and does not throw", () => {
  const missing = "/nonexistent/flashmla-test/libnvidia-ml.so.1";
  const r = nvmlGpu(0, { libPath: missing });
  assert.deepEqual(r, { ok: false, reason: `${missing} not found; set FLASHMLA_LIBNVML=/path/to/libnvidia-ml.so.1 if it is elsewhere` });
  assert.equal(nvmlGpu(0, { libPath: missing }), r, "the outcome is kept");
});

test("nvmlGpu() reports a file that is not a shared library as not loadable", () => {
  const fake = path.join(mkdtempSync(path.join(os.tmpdir(), "flashmla-nvml-")), "libnvidia-ml.so.1");
  writeFileSync(fake, "not an ELF file\n");
  const r = nvmlGpu(0, { libPath: fake });
  assert.equal(r.ok, false);
  if (!r.ok) assert.match(r.reason, new RegExp(`^${escape(fake)} could not be loaded \\(.*\\); set FLASHMLA_LIBNVML=`));
});

test("nvmlGpu() reports a library without NVML's functions", { skip: process.platform !== "linux" && "needs glibc's libc.so.6" }, () => {
  assert.deepEqual(nvmlGpu(0, { libPath: "libc.so.6" }), { ok: false, reason: "libc.so.6 has no nvmlInit_v2: not NVML, or an NVML too old" });
});

test("FLASHMLA_LIBNVML picks the library nvmlGpu() loads by default: importing and asking never throws", () => {
  // dist/test/cpu/driver -> dist/src
  const srcDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src");
  const script = `
    const { nvmlGpu } = await import(${JSON.stringify(pathToFileURL(path.join(srcDir, "driver/nvml.js")).href)});
    process.stdout.write(JSON.stringify(nvmlGpu(0)));
  `;
  const missing = "/nonexistent/flashmla-test/env/libnvidia-ml.so.1";
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, FLASHMLA_LIBNVML: missing }, encoding: "utf8" });
  assert.deepEqual(JSON.parse(out), { ok: false, reason: `${missing} not found; set FLASHMLA_LIBNVML=/path/to/libnvidia-ml.so.1 if it is elsewhere` });
});

/** A stand-in libnvidia-ml with one GPU: checks the handle it gave out and the clock type asked for. */
const FAKE_NVML_C = `
#include <string.h>
static int gpu;
static unsigned int reads;
int nvmlInit_v2(void) { return 0; }
const char *nvmlErrorString(int rc) { return rc == 6 ? "Not Found" : "Invalid Argument"; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **d) { if (i != 0) return 2; *d = &gpu; return 0; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **d) { (void)id; (void)d; return 6; }
int nvmlDeviceGetClockInfo(void *d, int type, unsigned int *mhz) { if (d != &gpu || type != 1) return 2; *mhz = 1700 + 10 * (reads++ % 3); return 0; }
int nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) { if (d != &gpu) return 2; *mw = 698500; return 0; }
/* Only the older name, as on drivers before ~535: the loader must fall back to it. */
int nvmlDeviceGetCurrentClocksThrottleReasons(void *d, unsigned long long *m) { if (d != &gpu) return 2; *m = 0x4ULL | (1ULL << 40); return 0; }
`;

function compileFakeNvml(): string | undefined {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-fake-nvml-"));
  writeFileSync(path.join(dir, "fake_nvml.c"), FAKE_NVML_C);
  const lib = path.join(dir, "libfake-nvml.so");
  try {
    execFileSync("cc", ["-shared", "-fPIC", "-o", lib, path.join(dir, "fake_nvml.c")], { stdio: "ignore" });
    return lib;
  } catch {
    return undefined;
  }
}

const fakeNvml = process.platform === "linux" ? compileFakeNvml() : undefined;

test("nvmlGpu() through a stand-in NVML: passes the handle, reads clock, power and the 64-bit reasons mask", { skip: fakeNvml === undefined && "needs Linux and a C compiler (cc)" }, () => {
  const r = nvmlGpu(0, { libPath: fakeNvml! });
  assert.ok(r.ok, r.ok ? "" : r.reason);
  // The stand-in knows no PCI bus id, and it has one GPU.
  assert.equal(r.gpu.matchedBy, "only-gpu");
  const samples = [r.gpu.sample(), r.gpu.sample(), r.gpu.sample()];
  assert.deepEqual(samples.map((s) => s?.smClockMhz).sort(), [1700, 1710, 1720]);
  for (const s of samples) {
    assert.equal(s?.powerW, 698.5);
    assert.equal(s?.reasons, 0x4n | (1n << 40n));
  }
  const other = nvmlGpu(1, { libPath: fakeNvml! });
  assert.equal(other.ok, false);
  if (!other.ok) assert.match(other.reason, /, and NVML sees 1 GPUs: cannot tell which is cuda:1$/);
});
