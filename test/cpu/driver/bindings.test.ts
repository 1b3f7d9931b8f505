import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { bindings, optionalSymbols } from "../../../src/driver/bindings.js";
import { loadKoffi } from "../../../src/driver/loadKoffi.js";
import { driverTypeDefinitions, registerDriverTypes } from "../../../src/driver/registerDriverTypes.js";

const entries = Object.entries(bindings) as [string, readonly [string, readonly string[]]][];

test("bindings: every entry is [\"CUresult\", [argTypes]] under a cu* symbol", () => {
  assert.ok(entries.length >= 50, `only ${entries.length} entries`);
  for (const [symbol, entry] of entries) {
    assert.match(symbol, /^cu[A-Z]\w*$/, symbol);
    assert.equal(entry.length, 2, symbol);
    assert.equal(entry[0], "CUresult", symbol);
    assert.ok(Array.isArray(entry[1]), symbol);
    for (const arg of entry[1]) assert.ok(typeof arg === "string" && arg.trim() === arg && arg.length > 0, `${symbol}: ${arg}`);
  }
});

test("bindings: every symbol the brief names is bound, with the _v2 names cuda.h maps to", () => {
  const required = [
    "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuCtxGetCurrent",
    "cuCtxSynchronize", "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuStreamQuery", "cuEventCreate",
    "cuEventDestroy_v2", "cuEventRecord", "cuEventSynchronize", "cuEventElapsedTime_v2", "cuMemAlloc_v2", "cuMemFree_v2",
    "cuMemGetInfo_v2", "cuMemsetD8_v2", "cuMemsetD32_v2", "cuMemsetD8Async", "cuMemsetD32Async", "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2",
    "cuModuleLoadData", "cuModuleUnload", "cuModuleGetFunction", "cuModuleGetGlobal_v2", "cuFuncGetAttribute",
    "cuFuncSetAttribute", "cuFuncGetParamInfo", "cuLaunchKernelEx", "cuTensorMapEncodeTiled", "cuStreamBeginCapture_v2",
    "cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy",
    "cuGetErrorName", "cuGetErrorString", "cuOccupancyMaxActiveClusters",
  ];
  for (const s of required) assert.ok(Object.hasOwn(bindings, s), `${s} missing`);
  for (const s of optionalSymbols) assert.ok(Object.hasOwn(bindings, s), `optional ${s} is not in the table`);
});

test("bindings: koffi resolves every type name once registerDriverTypes() ran", () => {
  const koffi = loadKoffi();
  registerDriverTypes(koffi);
  registerDriverTypes(koffi); // a second call must not re-declare (koffi names are global)
  for (const [symbol, [ret, args]] of entries) {
    assert.doesNotThrow(() => koffi.proto(ret, [...args]), symbol);
  }
  assert.equal(koffi.sizeof("CUdeviceptr"), 8);
  assert.equal(koffi.sizeof("CUdevice"), 4);
  assert.equal(koffi.sizeof("CUresult"), 4);
  assert.equal(koffi.sizeof("CUstream"), 8);
  assert.equal(koffi.sizeof("cuuint64_t"), 8);
  for (const name of Object.keys(driverTypeDefinitions)) assert.doesNotThrow(() => koffi.type(name), name);
});

const cudaHeader = [process.env.CUDA_HOME && path.join(process.env.CUDA_HOME, "include", "cuda.h"), "/usr/local/cuda/include/cuda.h"].find(
  (p): p is string => typeof p === "string" && existsSync(p),
);

/** The parameter types of `symbol`'s prototype in cuda.h, following `#define cuX cuX_v2` renames. */
function headerParamTypes(header: string, symbol: string): string[] | undefined {
  const protoOf = (name: string): string | undefined => {
    const at = header.indexOf(`CUresult CUDAAPI ${name}(`);
    if (at < 0) return undefined;
    const open = header.indexOf("(", at);
    return header.slice(open + 1, header.indexOf(")", open));
  };
  let params = protoOf(symbol);
  if (params === undefined) {
    // e.g. "#define cuMemcpyHtoD __CUDA_API_PTDS(cuMemcpyHtoD_v2)" or "#define cuMemAlloc cuMemAlloc_v2"
    const define = new RegExp(`#define\\s+(\\w+)\\s+(?:__CUDA_API_PT(?:DS|SZ)\\(\\s*)?${symbol}\\b`).exec(header);
    if (!define) return undefined;
    params = protoOf(define[1]);
    if (params === undefined) return undefined;
  }
  const trimmed = params.replace(/\s+/g, " ").trim();
  if (trimmed === "void" || trimmed === "") return [];
  return trimmed.split(",").map((p) => normalizeType(p.trim().replace(/\w+$/, "")));
}

function normalizeType(t: string): string {
  return t.replace(/\s+/g, " ").replace(/\s*\*\s*/g, "*").trim();
}

test("bindings: argument types match the cuda.h prototypes", { skip: cudaHeader ? false : "no cuda.h (set CUDA_HOME)" }, () => {
  const header = readFileSync(cudaHeader!, "utf8");
  for (const [symbol, [, args]] of entries) {
    const expected = headerParamTypes(header, symbol);
    assert.ok(expected, `${symbol}: no prototype in ${cudaHeader}`);
    assert.deepEqual(args.map(normalizeType), expected, symbol);
  }
});

test("bindings: versioned names are used wherever cuda.h renames a function", { skip: cudaHeader ? false : "no cuda.h (set CUDA_HOME)" }, () => {
  const header = readFileSync(cudaHeader!, "utf8");
  // The fallback cuEventElapsedTime is bound on purpose, for drivers older than 12.8.
  const deliberateOld = new Set(["cuEventElapsedTime"]);
  for (const [symbol] of entries) {
    const renamed = new RegExp(`#define\\s+${symbol}\\s+(?:__CUDA_API_PT(?:DS|SZ)\\(\\s*)?(\\w+)`).exec(header);
    if (renamed && renamed[1] !== symbol && !deliberateOld.has(symbol)) {
      assert.fail(`${symbol} is #defined to ${renamed[1]} in cuda.h: bind ${renamed[1]}`);
    }
  }
});
