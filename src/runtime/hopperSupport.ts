/** What {@link hopperSupport} needs to know about a GPU (a Device has both). */
export interface GpuIdentity {
  /** e.g. "NVIDIA A100-SXM4-80GB" */
  name: string;
  computeCapability: { readonly major: number; readonly minor: number };
}

/** Whether the sm_90a kernels can run on a GPU, and if not why, in words a user can act on. */
export type HopperSupport = { ok: true } | { ok: false; reason: string };

/**
 * Decides whether the kernels in dist/kernels can run on `gpu`. They are compiled for sm_90a, whose
 * wgmma, TMA and setmaxnreg instructions exist only on compute capability 9.0 (H100, H200, H800,
 * GH200): an "a" target runs neither on older GPUs nor on newer ones (the driver would refuse the
 * cubin with CUDA_ERROR_NO_BINARY_FOR_GPU, which does not say what to do).
 */
export function hopperSupport(gpu: GpuIdentity): HopperSupport {
  const { major, minor } = gpu.computeCapability;
  if (major === 9 && minor === 0) return { ok: true };
  const when = major < 9 ? "an older architecture" : "a newer architecture, which cannot run sm_90a code";
  return {
    ok: false,
    reason: `${gpu.name} has compute capability ${major}.${minor} (${when}); the flashmla-ts kernels are built for sm_90a and run only on compute capability 9.0 GPUs (H100, H200, H800, GH200)`,
  };
}
