import { fileURLToPath } from "node:url";
import path from "node:path";

/** Every environment variable and path the package reads lives here. */
const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

export const config = {
  /** Root of the installed package (holds dist/ and kernels/). */
  packageRoot,
  /** Path or soname of the CUDA driver library. FLASHMLA_LIBCUDA overrides. */
  libcudaPath: process.env.FLASHMLA_LIBCUDA ?? "libcuda.so.1",
  /** Path or soname of NVML, which the benchmark samples clocks and power with. FLASHMLA_LIBNVML overrides. */
  libnvmlPath: process.env.FLASHMLA_LIBNVML ?? "libnvidia-ml.so.1",
  /** Folder holding the compiled cubins and manifest.json. FLASHMLA_KERNEL_DIR overrides. */
  kernelDir: process.env.FLASHMLA_KERNEL_DIR ?? path.join(packageRoot, "dist", "kernels"),
  /** CUDA device ordinal used by default. FLASHMLA_DEVICE overrides. */
  deviceOrdinal: Number(process.env.FLASHMLA_DEVICE ?? "0"),
  /** Set FLASHMLA_REQUIRE_GPU=1 to make the GPU test suite fail (not skip) when no GPU is found. */
  requireGpu: process.env.FLASHMLA_REQUIRE_GPU === "1",
} as const;
