import { config } from "../config.js";
import { NoGpuError } from "../errors/NoGpuError.js";
import { bindings, optionalSymbols, type DriverSymbol } from "./bindings.js";
import { cudaErrorFor } from "./cudaErrorFor.js";
import { CUresult } from "./cudaEnums.js";
import type { DriverApi } from "./DriverApi.js";
import { loadKoffi, loadLibrary, messageOf, type Koffi } from "./loadKoffi.js";
import { registerDriverTypes } from "./registerDriverTypes.js";

type LoadState = { ok: true; api: DriverApi } | { ok: false; error: NoGpuError };

let state: LoadState | undefined;

/**
 * The CUDA driver, loaded from `config.libcudaPath` (FLASHMLA_LIBCUDA) on first use, with every
 * function in `bindings` declared and cuInit(0) called once. The outcome, success or failure, is
 * kept for the life of the process.
 *
 * @throws NoGpuError when the library cannot be loaded, lacks a required function, or cuInit fails
 *   (no device, driver/library mismatch, ...).
 */
export function loadDriver(): DriverApi {
  state ??= tryLoadDriver(config.libcudaPath);
  if (!state.ok) throw state.error;
  return state.api;
}

/** Whether the driver loads and initialises, without throwing. */
export function driverAvailable(): { ok: true } | { ok: false; reason: string } {
  try {
    loadDriver();
    return { ok: true };
  } catch (e) {
    return { ok: false, reason: e instanceof Error ? e.message : String(e) };
  }
}

function tryLoadDriver(libPath: string): LoadState {
  let koffi: Koffi;
  try {
    koffi = loadKoffi();
  } catch (e) {
    return fail(`the FFI library koffi could not be loaded on this platform (${messageOf(e)})`, e);
  }
  registerDriverTypes(koffi);

  const opened = loadLibrary(koffi, libPath);
  if (!opened.ok) {
    const reason = opened.missing
      ? `${libPath} not found: no NVIDIA driver on this machine`
      : `${libPath} could not be loaded (${messageOf(opened.error)})`;
    return fail(`${reason}; set FLASHMLA_LIBCUDA=/path/to/libcuda.so.1 if it is elsewhere`, opened.error);
  }

  const api: Record<string, unknown> = {};
  const optional = new Set<string>(optionalSymbols);
  for (const [symbol, [ret, args]] of Object.entries(bindings) as [DriverSymbol, (typeof bindings)[DriverSymbol]][]) {
    try {
      api[symbol] = opened.lib.func(symbol, ret, [...args]);
    } catch (e) {
      if (optional.has(symbol)) continue;
      return fail(`${libPath} has no ${symbol}: the NVIDIA driver is too old (a driver for CUDA 12.0 or newer is needed)`, e);
    }
  }
  const driver = api as DriverApi;

  const rc = driver.cuInit(0);
  if (rc !== CUresult.SUCCESS) {
    const err = cudaErrorFor(driver, rc, "cuInit");
    const reason =
      rc === CUresult.ERROR_NO_DEVICE
        ? `the NVIDIA driver found no CUDA device (${err.errorName})`
        : `the NVIDIA driver did not initialise: ${err.message}`;
    return fail(reason, err);
  }
  return { ok: true, api: driver };
}

function fail(reason: string, cause: unknown): LoadState {
  return { ok: false, error: new NoGpuError(reason, { cause }) };
}
