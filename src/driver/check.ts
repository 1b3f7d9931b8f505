import { cudaErrorFor } from "./cudaErrorFor.js";
import { loadDriver } from "./loadDriver.js";

/**
 * Throws a CudaError unless `result` is CUDA_SUCCESS. `callName` is the driver symbol that
 * returned it, e.g. `check(driver.cuMemAlloc_v2(out, n), "cuMemAlloc_v2")`.
 */
export function check(result: number, callName: string): void {
  if (result !== 0) throw cudaErrorFor(loadDriver(), result, callName);
}
