/**
 * NCCL (libnccl.so.2) could not be loaded. The message lists every place that was tried, in order,
 * with why each failed, then how to install NCCL, e.g.
 * `NCCL could not be loaded; tried: FLASHMLA_NCCL=/opt/nccl (/opt/nccl/libnccl.so.2: not found); the
 * system loader (libnccl.so.2: not found); python3 (no nvidia/nccl/lib in its environment); python (not
 * installed). Install NCCL with ...`.
 */
export class NcclUnavailableError extends Error {
  override readonly name = "NcclUnavailableError";
  constructor(
    /** Each place tried, in order, with why it failed: "the system loader (libnccl.so.2: not found)". */
    readonly tried: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(`NCCL could not be loaded; tried: ${tried.length > 0 ? tried.join("; ") : "nothing"}. ${NCCL_INSTALL_HINT}`, options);
  }
}

/** How to get libnccl.so.2, as the error says it. */
export const NCCL_INSTALL_HINT =
  "Install NCCL with `pip install nvidia-nccl-cu13` (CUDA 13; nvidia-nccl-cu12 for CUDA 12), NVIDIA's libnccl2 package " +
  "(CUDA network repository: apt install libnccl2), or Debian's libnccl2 (contrib, trixie and later); " +
  "or set FLASHMLA_NCCL to libnccl.so.2 or to the folder holding it";
