import { config } from "../config.js";
import { NoGpuError } from "../errors/NoGpuError.js";
import { bindings, optionalSymbols, type DriverSymbol } from "./bindings.js";
import { cudaErrorFor } from "./cudaErrorFor.js";
import { CUresult } from "./cudaEnums.js";
import type { DriverApi } from "./DriverApi.js";
import { loadKoffi, loadLibrary, messageOf, type Koffi } from "./loadKoffi.js";
import { registerDriverTypes } from "./registerDriverTypes.js";

/**
 * Why the driver is unusable: "missing" (no libcuda, or one without the functions we need, or koffi
 * cannot load on this platform), "no-device" (cuInit found no CUDA device), "init-failed" (cuInit
 * failed otherwise: a driver/library mismatch, an insufficient driver; the cause is its CudaError).
 */
export type DriverFailure = "missing" | "no-device" | "init-failed";

/** The loader's verdict: the driver, or why not and the NoGpuError every GPU call throws. */
export type DriverStatus = { ok: true; api: DriverApi } | { ok: false; failure: DriverFailure; error: NoGpuError };

let state: DriverStatus | undefined;

/**
 * The CUDA driver, loaded from `config.libcudaPath` (FLASHMLA_LIBCUDA) on first use, with every
 * function in `bindings` declared and cuInit(0) called once. The outcome, success or failure, is
 * kept for the life of the process.
 *
 * @throws NoGpuError when the library cannot be loaded, lacks a required function, or cuInit fails
 *   (no device, driver/library mismatch, ...).
 */
export function loadDriver(): DriverApi {
  const status = driverStatus();
  if (!status.ok) throw status.error;
  return status.api;
}

/** The loader's verdict, without throwing: the driver, or why it is unusable and the error GPU calls throw. */
export function driverStatus(): DriverStatus {
  state ??= tryLoadDriver(config.libcudaPath);
  return state;
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

function tryLoadDriver(libPath: string): DriverStatus {
  let koffi: Koffi;
  try {
    koffi = loadKoffi();
  } catch (e) {
    return fail("missing", `the FFI library koffi could not be loaded on this platform (${messageOf(e)})`, e);
  }
  registerDriverTypes(koffi);

  const opened = loadLibrary(koffi, libPath);
  if (!opened.ok) {
    const reason = opened.missing
      ? `${libPath} not found: no NVIDIA driver on this machine`
      : `${libPath} could not be loaded (${messageOf(opened.error)})`;
    return fail("missing", `${reason}; set FLASHMLA_LIBCUDA=/path/to/libcuda.so.1 if it is elsewhere`, opened.error);
  }

  const api: Record<string, unknown> = {};
  const optional = new Set<string>(optionalSymbols);
  for (const [symbol, [ret, args]] of Object.entries(bindings) as [DriverSymbol, (typeof bindings)[DriverSymbol]][]) {
    try {
      api[symbol] = opened.lib.func(symbol, ret, [...args]);
    } catch (e) {
      if (optional.has(symbol)) continue;
      return fail("missing", `${libPath} has no ${symbol}: the NVIDIA driver is too old (a driver for CUDA 12.0 or newer is needed)`, e);
    }
  }
  const driver = api as DriverApi;

  const rc = driver.cuInit(0);
  if (rc !== CUresult.SUCCESS) {
    const err = cudaErrorFor(driver, rc, "cuInit");
    if (rc === CUresult.ERROR_NO_DEVICE) return fail("no-device", `the NVIDIA driver found no CUDA device (${err.errorName})`, err);
    return fail("init-failed", `the NVIDIA driver did not initialise: ${err.message}`, err);
  }
  return { ok: true, api: driver };
}

function fail(failure: DriverFailure, reason: string, cause: unknown): DriverStatus {
  return { ok: false, failure, error: new NoGpuError(reason, { cause }) };
}
