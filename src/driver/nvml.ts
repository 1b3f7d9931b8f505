import { config } from "../config.js";
import { loadDriver } from "./loadDriver.js";
import { loadKoffi, loadLibrary, messageOf, type Koffi } from "./loadKoffi.js";

/**
 * The NVML functions the benchmark calls, as `symbol: [returnType, [argTypes]]` spelled as in
 * nvml.h's prototypes. NVML ships with the NVIDIA driver (libnvidia-ml.so.1) and is optional here:
 * without it the benchmark only loses its clock and power figures.
 */
export const nvmlBindings = {
  nvmlInit_v2: ["nvmlReturn_t", []],
  nvmlErrorString: ["const char *", ["nvmlReturn_t"]],
  nvmlDeviceGetCount_v2: ["nvmlReturn_t", ["unsigned int *"]],
  nvmlDeviceGetHandleByIndex_v2: ["nvmlReturn_t", ["unsigned int", "nvmlDevice_t *"]],
  nvmlDeviceGetHandleByPciBusId_v2: ["nvmlReturn_t", ["const char *", "nvmlDevice_t *"]],
  nvmlDeviceGetClockInfo: ["nvmlReturn_t", ["nvmlDevice_t", "nvmlClockType_t", "unsigned int *"]],
  nvmlDeviceGetPowerUsage: ["nvmlReturn_t", ["nvmlDevice_t", "unsigned int *"]],
  // The same query under its newer and its older name; drivers before ~535 only have the older,
  // and NVML 13 deprecates it.
  nvmlDeviceGetCurrentClocksEventReasons: ["nvmlReturn_t", ["nvmlDevice_t", "unsigned long long *"]],
  nvmlDeviceGetCurrentClocksThrottleReasons: ["nvmlReturn_t", ["nvmlDevice_t", "unsigned long long *"]],
} as const;

const optionalNvmlSymbols = new Set<string>(["nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"]);

const NVML_SUCCESS = 0;
/** nvmlClockType_t. */
const NVML_CLOCK_SM = 1;

interface NvmlApi {
  nvmlInit_v2(): number;
  nvmlErrorString(rc: number): string;
  nvmlDeviceGetCount_v2(count: Uint32Array): number;
  nvmlDeviceGetHandleByIndex_v2(index: number, device: BigUint64Array): number;
  nvmlDeviceGetHandleByPciBusId_v2(busId: string, device: BigUint64Array): number;
  nvmlDeviceGetClockInfo(device: bigint, type: number, mhz: Uint32Array): number;
  nvmlDeviceGetPowerUsage(device: bigint, milliwatts: Uint32Array): number;
  nvmlDeviceGetCurrentClocksEventReasons?(device: bigint, mask: BigUint64Array): number;
  nvmlDeviceGetCurrentClocksThrottleReasons?(device: bigint, mask: BigUint64Array): number;
}

/** One reading of a GPU's state. */
export interface NvmlSample {
  /** SM clock now. */
  smClockMhz: number;
  /**
   * Board power; absent where NVML did not answer. NVML averages it over the last second on Ampere
   * and newer (Hopper included), so a short burst of work shows only in part.
   */
  powerW?: number;
  /** nvml.h's clocks-event-reasons mask (see clockReasonNames); absent where NVML did not answer. */
  reasons?: bigint;
}

/** A GPU opened in NVML. */
export interface NvmlGpu {
  /** How NVML found the GPU: its PCI bus id from the CUDA driver, or the only GPU there is. */
  matchedBy: "pci-bus-id" | "only-gpu";
  /** Reads the state now; undefined when NVML fails to read the SM clock. Never throws. */
  sample(): NvmlSample | undefined;
}

/** {@link nvmlGpu}'s answer: the GPU, or why NVML cannot be used. */
export type NvmlGpuResult = { ok: true; gpu: NvmlGpu } | { ok: false; reason: string };

/** Options of {@link nvmlGpu}. */
export interface NvmlGpuOptions {
  /** NVML's path or soname. @default config.libnvmlPath (FLASHMLA_LIBNVML, else libnvidia-ml.so.1) */
  libPath?: string;
}

type LoadResult = { ok: true; api: NvmlApi } | { ok: false; reason: string };

const loaded = new Map<string, LoadResult>();
const opened = new Map<string, NvmlGpuResult>();

/**
 * CUDA device `cudaOrdinal` as NVML sees it, for sampling its clock and power. NVML is loaded and
 * initialised on first use; NVML's order need not be CUDA's (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER),
 * so the GPU is matched by the PCI bus id the CUDA driver gives, or, failing that, taken by index
 * only when NVML sees exactly one GPU. The outcome is kept per library and ordinal. Never throws:
 * a missing library or symbol, a failed nvmlInit or no matching GPU come back as `reason`.
 */
export function nvmlGpu(cudaOrdinal: number, options: NvmlGpuOptions = {}): NvmlGpuResult {
  const libPath = options.libPath ?? config.libnvmlPath;
  const key = `${libPath}\n${cudaOrdinal}`;
  let result = opened.get(key);
  if (result === undefined) {
    try {
      result = openGpu(libPath, cudaOrdinal);
    } catch (e) {
      result = { ok: false, reason: `NVML call failed: ${messageOf(e)}` };
    }
    opened.set(key, result);
  }
  return result;
}

function openGpu(libPath: string, cudaOrdinal: number): NvmlGpuResult {
  let lib = loaded.get(libPath);
  if (lib === undefined) {
    lib = loadNvml(libPath);
    loaded.set(libPath, lib);
  }
  if (!lib.ok) return lib;
  const api = lib.api;

  const found = findHandle(api, cudaOrdinal);
  if (!found.ok) return found;
  const { handle, matchedBy } = found;

  const getReasons = api.nvmlDeviceGetCurrentClocksEventReasons ?? api.nvmlDeviceGetCurrentClocksThrottleReasons;
  const mhz = new Uint32Array(1);
  const milliwatts = new Uint32Array(1);
  const mask = new BigUint64Array(1);
  const sample = (): NvmlSample | undefined => {
    if (api.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM, mhz) !== NVML_SUCCESS) return undefined;
    const s: NvmlSample = { smClockMhz: mhz[0] };
    if (api.nvmlDeviceGetPowerUsage(handle, milliwatts) === NVML_SUCCESS) s.powerW = milliwatts[0] / 1000;
    if (getReasons !== undefined && getReasons(handle, mask) === NVML_SUCCESS) s.reasons = mask[0];
    return s;
  };
  // One read now, so a GPU that cannot report its SM clock (or an FFI mistake) shows up here, as a
  // reason, and not as a benchmark without samples or an exception in the middle of one.
  const rc = api.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM, mhz);
  if (rc !== NVML_SUCCESS) return { ok: false, reason: nvmlError(api, "nvmlDeviceGetClockInfo(NVML_CLOCK_SM)", rc) };
  return { ok: true, gpu: { matchedBy, sample: () => safely(sample) } };
}

/** NVML's handle of cuda:`cudaOrdinal`: by PCI bus id, else the only GPU NVML sees. */
function findHandle(api: NvmlApi, cudaOrdinal: number): { ok: true; handle: bigint; matchedBy: NvmlGpu["matchedBy"] } | { ok: false; reason: string } {
  const out = new BigUint64Array(1);
  const busId = cudaPciBusId(cudaOrdinal);
  let why: string;
  if (busId.ok) {
    const rc = api.nvmlDeviceGetHandleByPciBusId_v2(busId.id, out);
    if (rc === NVML_SUCCESS) return { ok: true, handle: out[0], matchedBy: "pci-bus-id" };
    why = `NVML has no GPU at PCI ${busId.id} (${nvmlError(api, "nvmlDeviceGetHandleByPciBusId_v2", rc)})`;
  } else {
    why = busId.reason;
  }
  const count = new Uint32Array(1);
  let rc = api.nvmlDeviceGetCount_v2(count);
  if (rc !== NVML_SUCCESS) return { ok: false, reason: `${why}; ${nvmlError(api, "nvmlDeviceGetCount_v2", rc)}` };
  if (count[0] !== 1 || cudaOrdinal !== 0) return { ok: false, reason: `${why}, and NVML sees ${count[0]} GPUs: cannot tell which is cuda:${cudaOrdinal}` };
  rc = api.nvmlDeviceGetHandleByIndex_v2(0, out);
  if (rc !== NVML_SUCCESS) return { ok: false, reason: `${why}; ${nvmlError(api, "nvmlDeviceGetHandleByIndex_v2", rc)}` };
  return { ok: true, handle: out[0], matchedBy: "only-gpu" };
}

function loadNvml(libPath: string): LoadResult {
  let koffi: Koffi;
  try {
    koffi = loadKoffi();
  } catch (e) {
    return { ok: false, reason: `the FFI library koffi could not be loaded (${messageOf(e)})` };
  }
  registerNvmlTypes(koffi);

  const opened = loadLibrary(koffi, libPath);
  if (!opened.ok) {
    const what = opened.missing ? `${libPath} not found` : `${libPath} could not be loaded (${messageOf(opened.error)})`;
    return { ok: false, reason: `${what}; set FLASHMLA_LIBNVML=/path/to/libnvidia-ml.so.1 if it is elsewhere` };
  }
  const lib = opened.lib;

  const api: Record<string, unknown> = {};
  for (const [symbol, [ret, args]] of Object.entries(nvmlBindings)) {
    try {
      api[symbol] = lib.func(symbol, ret, [...args]);
    } catch {
      if (optionalNvmlSymbols.has(symbol)) continue;
      return { ok: false, reason: `${libPath} has no ${symbol}: not NVML, or an NVML too old` };
    }
  }
  const nvml = api as unknown as NvmlApi;
  const rc = nvml.nvmlInit_v2();
  if (rc !== NVML_SUCCESS) return { ok: false, reason: nvmlError(nvml, "nvmlInit_v2", rc) };
  return { ok: true, api: nvml };
}

/** The CUDA driver's PCI bus id of `cudaOrdinal` ("0000:18:00.0"), which NVML accepts as is. */
function cudaPciBusId(cudaOrdinal: number): { ok: true; id: string } | { ok: false; reason: string } {
  try {
    const driver = loadDriver();
    const dev = new Int32Array(1);
    let rc = driver.cuDeviceGet(dev, cudaOrdinal);
    if (rc !== 0) return { ok: false, reason: `cuDeviceGet(${cudaOrdinal}) returned ${rc}` };
    // The driver asks for room for 13 characters with the NUL; 32 leaves slack for longer domains.
    const buf = new Uint8Array(32);
    rc = driver.cuDeviceGetPCIBusId(buf, buf.length, dev[0]);
    if (rc !== 0) return { ok: false, reason: `cuDeviceGetPCIBusId returned ${rc}` };
    const end = buf.indexOf(0);
    return { ok: true, id: new TextDecoder().decode(end < 0 ? buf : buf.subarray(0, end)) };
  } catch (e) {
    return { ok: false, reason: `no PCI bus id from the CUDA driver (${messageOf(e)})` };
  }
}

function nvmlError(api: NvmlApi, call: string, rc: number): string {
  let text: string | undefined;
  try {
    text = api.nvmlErrorString(rc);
  } catch {
    // The code alone still says what failed.
  }
  return `${call} returned ${rc}${text ? ` (${text})` : ""}`;
}

function safely<T>(f: () => T): T | undefined {
  try {
    return f();
  } catch {
    return undefined;
  }
}

const registered = new WeakSet<object>();

/** Declares nvml.h's type names with koffi, once per koffi instance (koffi's names are global). */
function registerNvmlTypes(koffi: Koffi): void {
  if (registered.has(koffi)) return;
  koffi.alias("nvmlReturn_t", "int");
  koffi.alias("nvmlClockType_t", "int");
  koffi.pointer("nvmlDevice_t", koffi.opaque());
  registered.add(koffi);
}
