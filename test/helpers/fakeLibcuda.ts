import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { bindings } from "../../src/driver/bindings.js";

/**
 * How the fake driver answers, read from its environment when a process loads it:
 * FAKE_CUDA_INIT (cuInit's CUresult, default 0), FAKE_CUDA_COUNT (devices, default 1),
 * FAKE_CUDA_CC ("major.minor", default "9.0"), FAKE_CUDA_NAME (default "Fake H200").
 */
export interface FakeDriverEnv {
  FAKE_CUDA_INIT?: string;
  FAKE_CUDA_COUNT?: string;
  FAKE_CUDA_CC?: string;
  FAKE_CUDA_NAME?: string;
}

/** The device answers that gpuStatus and Device.count read; every other function returns CUDA_ERROR_NOT_SUPPORTED (801). */
const ANSWERS = `
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
static int env_int(const char *name, int fallback) { const char *v = getenv(name); return v ? atoi(v) : fallback; }
int cuInit(unsigned int flags) { (void)flags; return env_int("FAKE_CUDA_INIT", 0); }
int cuDriverGetVersion(int *v) { *v = 12080; return 0; }
int cuDeviceGetCount(int *n) { *n = env_int("FAKE_CUDA_COUNT", 1); return 0; }
int cuDeviceGet(int *d, int ordinal) { if (ordinal >= env_int("FAKE_CUDA_COUNT", 1)) return 101; *d = ordinal; return 0; }
int cuDeviceGetName(char *out, int len, int d) {
  const char *name = getenv("FAKE_CUDA_NAME"); (void)d;
  strncpy(out, name ? name : "Fake H200", (size_t)len - 1); out[len - 1] = 0; return 0;
}
int cuDeviceGetAttribute(int *out, int attribute, int d) {
  const char *cc = getenv("FAKE_CUDA_CC"); int major = 9, minor = 0; (void)d;
  if (cc) { major = atoi(cc); const char *dot = strchr(cc, '.'); minor = dot ? atoi(dot + 1) : 0; }
  switch (attribute) { case 75: *out = major; return 0; case 76: *out = minor; return 0; case 16: *out = 132; return 0; default: *out = 0; return 0; }
}
int cuDeviceTotalMem_v2(size_t *bytes, int d) { (void)d; *bytes = (size_t)1 << 37; return 0; }
static const char *NAMES[] = { "CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA_ERROR_FAKE" };
int cuGetErrorName(int code, const char **out) { *out = code == 100 ? NAMES[0] : code == 35 ? NAMES[1] : NAMES[2]; return 0; }
int cuGetErrorString(int code, const char **out) { (void)code; *out = "fake driver"; return 0; }
`;

const ANSWERED = new Set(["cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute", "cuDeviceTotalMem_v2", "cuGetErrorName", "cuGetErrorString"]);

/**
 * Builds a stand-in libcuda.so.1 in `dir` with the C compiler, exporting every symbol the loader binds,
 * so the driver-dependent paths of gpuStatus and Device.count run on a machine without a GPU. Returns
 * its path, or undefined when no compiler is there (the caller skips).
 */
export function buildFakeLibcuda(dir: string): string | undefined {
  mkdirSync(dir, { recursive: true });
  const stubs = Object.keys(bindings)
    .filter((symbol) => !ANSWERED.has(symbol))
    .map((symbol) => `int ${symbol}() { return 801; }`)
    .join("\n");
  const source = path.join(dir, "fake_libcuda.c");
  writeFileSync(source, `${ANSWERS}\n${stubs}\n`);
  const lib = path.join(dir, "libcuda.so.1");
  try {
    execFileSync(process.env.CC ?? "cc", ["-shared", "-fPIC", "-w", "-o", lib, source], { stdio: "ignore" });
  } catch {
    return undefined;
  }
  return lib;
}
