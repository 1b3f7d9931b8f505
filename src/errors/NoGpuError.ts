/**
 * No usable NVIDIA GPU: the driver library could not be loaded, it found no device, or the device is
 * not a Hopper GPU (compute capability 9.0), which the sm_90a kernels need. The message
 * says why and points to the CPU reference backend, e.g.
 * `libcuda.so.1 not found: no NVIDIA driver on this machine; set FLASHMLA_LIBCUDA=/path/to/libcuda.so.1
 * if it is elsewhere; the CPU reference (mlaDecodeReference) works without a GPU`.
 */
export class NoGpuError extends Error {
  override readonly name = "NoGpuError";
  constructor(
    /** Why there is no GPU, without the advice about the CPU reference. */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`${reason}; the CPU reference (mlaDecodeReference) works without a GPU`, options);
  }
}
