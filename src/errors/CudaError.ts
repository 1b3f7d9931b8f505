/**
 * A CUDA driver call returned an error. The message names the call, the CUresult's name and code,
 * and the driver's description, e.g.
 * `cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory`, and for some calls a detail after
 * "; " (DeviceBuffer.alloc: the size asked for, the free memory, and what to do).
 */
export class CudaError extends Error {
  override readonly name = "CudaError";
  constructor(
    /** The driver symbol that failed, e.g. "cuMemAlloc_v2". */
    readonly callName: string,
    /** The CUresult code. */
    readonly code: number,
    /** cuGetErrorName's answer, e.g. "CUDA_ERROR_OUT_OF_MEMORY". */
    readonly errorName: string,
    /** cuGetErrorString's answer, e.g. "out of memory". */
    readonly errorString: string,
    /** What the caller can do about it, appended after "; " (e.g. sizes and a remedy for out-of-memory). */
    readonly detail?: string,
  ) {
    super(`${callName} failed: ${errorName} (${code}): ${errorString}${detail ? `; ${detail}` : ""}`);
  }
}
