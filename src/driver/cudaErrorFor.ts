import { CudaError } from "../errors/CudaError.js";
import { cuResultName } from "./cuResultName.js";
import type { DriverApi } from "./DriverApi.js";
import { loadKoffi } from "./loadKoffi.js";

/**
 * Builds the CudaError for `code` returned by `callName`, asking the driver for the code's name
 * and description (cuGetErrorName / cuGetErrorString) and falling back to cuda.h's names when the
 * driver cannot answer. `detail` (what the caller can do) goes after the description.
 */
export function cudaErrorFor(api: DriverApi | undefined, code: number, callName: string, detail?: string): CudaError {
  const name = api ? driverString(api.cuGetErrorName, code) : undefined;
  const description = api ? driverString(api.cuGetErrorString, code) : undefined;
  return new CudaError(callName, code, name ?? cuResultName(code), description ?? "no description from the driver", detail);
}

function driverString(fn: (code: number, out: ArrayBufferView) => number, code: number): string | undefined {
  const out = new BigUint64Array(1);
  if (fn(code, out) !== 0 || out[0] === 0n) return undefined;
  return loadKoffi().decode.string(out[0]);
}
