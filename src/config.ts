import { fileURLToPath } from "node:url";
import path from "node:path";

/** Every environment variable and path the package reads lives here. */
const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const kernelDir = process.env.FLASHMLA_KERNEL_DIR ?? path.join(packageRoot, "dist", "kernels");

export const config = {
  /** Root of the installed package or of the clone (holds dist/). */
  packageRoot,
  /** Path or soname of the CUDA driver library. FLASHMLA_LIBCUDA overrides. */
  libcudaPath: process.env.FLASHMLA_LIBCUDA ?? "libcuda.so.1",
  /** Path or soname of NVML, which the benchmark samples clocks and power with. FLASHMLA_LIBNVML overrides. */
  libnvmlPath: process.env.FLASHMLA_LIBNVML ?? "libnvidia-ml.so.1",
  /** Folder holding the compiled cubins and manifest.json. FLASHMLA_KERNEL_DIR overrides. */
  kernelDir,
  /**
   * Folder of the cubins only the tests load (kernels/testing/), with a manifest of its own: under
   * kernelDir so that a FLASHMLA_KERNEL_DIR build carries its own, in a folder of its own so that the
   * package does not ship them.
   */
  testKernelDir: path.join(kernelDir, "testing"),
  /** CUDA device ordinal used by default. FLASHMLA_DEVICE overrides. */
  deviceOrdinal: Number(process.env.FLASHMLA_DEVICE ?? "0"),
  /**
   * libnccl.so.2's path, or a folder holding it, tried before the system loader and Python's
   * nvidia/nccl/lib (src/nccl). FLASHMLA_NCCL sets it; read at each search, not at import.
   */
  get ncclPath(): string | undefined {
    return process.env.FLASHMLA_NCCL;
  },
  /** Set FLASHMLA_REQUIRE_GPU=1 to make the GPU test suite fail (not skip) when no GPU is found. */
  requireGpu: process.env.FLASHMLA_REQUIRE_GPU === "1",
} as const;
