import { check } from "../driver/check.js";
import { NoGpuError } from "../errors/NoGpuError.js";
import { Device, driverOn } from "../runtime/Device.js";
import { hopperSupport } from "../runtime/hopperSupport.js";
import type { Kernel } from "../runtime/Kernel.js";
import { Module } from "../runtime/Module.js";
import type { CStruct } from "./CStruct.js";
import { CombineParamsStruct, DenseParamsStruct, SparseParamsStruct, Fp8KvWriteParamsStruct, RefParamsStruct, SchedParamsStruct, SparseRefParamsStruct } from "./params.js";

/** The loaded kernels of one device, each checked against its params mirror. */
export interface DecodeKernels {
  sched: Kernel;
  denseBf16: Kernel;
  denseFp16: Kernel;
  denseSmemBytes: number;
  seesawBf16: Kernel;
  seesawFp16: Kernel;
  seesawFastBf16: Kernel;
  seesawFastFp16: Kernel;
  seesawSmemBytes: number;
  sparseBf16: Kernel;
  sparseCrossoverBf16: Kernel;
  sparseSmemBytes: number;
  combineBf16: Kernel;
  combineFp16: Kernel;
  fp8KvWrite: Kernel;
  referenceFp32: Kernel;
  sparseReferenceFp32: Kernel;
}

const cache = new Map<number, DecodeKernels>();

function readInt32Global(mod: Module, name: string, deviceOrdinal: number): Int32Array {
  const { ptr, sizeBytes } = mod.getGlobal(name);
  const out = new Int32Array(sizeBytes / 4);
  check(driverOn(deviceOrdinal).cuMemcpyDtoH_v2(out, ptr, sizeBytes), "cuMemcpyDtoH_v2");
  return out;
}

function checked(mod: Module, layoutSymbol: string, struct: CStruct<string>, deviceOrdinal: number): void {
  struct.checkLayout(readInt32Global(mod, layoutSymbol, deviceOrdinal));
}

/**
 * Loads (once per device) the cubins from dist/kernels and verifies every params layout.
 * @throws NoGpuError without a driver or GPU, or when the GPU is not a Hopper (compute capability 9.0).
 */
export function decodeKernels(deviceOrdinal = 0): DecodeKernels {
  const hit = cache.get(deviceOrdinal);
  if (hit) return hit;
  // Before any cubin is read: on another GPU the driver's refusal would not say what to do.
  const support = hopperSupport(Device.get(deviceOrdinal));
  if (!support.ok) throw new NoGpuError(support.reason);
  const sched = Module.load("sched_meta", { deviceOrdinal });
  checked(sched, "sched_params_layout", SchedParamsStruct, deviceOrdinal);
  const dense = Module.load("dense_decode_sm90", { deviceOrdinal });
  checked(dense, "dense_params_layout", DenseParamsStruct, deviceOrdinal);
  const seesaw = Module.load("dense_seesaw_sm90", { deviceOrdinal });
  checked(seesaw, "dense_seesaw_params_layout", DenseParamsStruct, deviceOrdinal);
  const sparse = Module.load("sparse_decode_sm90", { deviceOrdinal });
  checked(sparse, "sparse_params_layout", SparseParamsStruct, deviceOrdinal);
  const combine = Module.load("combine", { deviceOrdinal });
  checked(combine, "combine_params_layout", CombineParamsStruct, deviceOrdinal);
  const fp8 = Module.load("fp8_kv_writer", { deviceOrdinal });
  checked(fp8, "fp8_kv_write_params_layout", Fp8KvWriteParamsStruct, deviceOrdinal);
  const ref = Module.load("reference_fp32", { deviceOrdinal });
  checked(ref, "ref_params_layout", RefParamsStruct, deviceOrdinal);
  checked(ref, "sparse_ref_params_layout", SparseRefParamsStruct, deviceOrdinal);

  const denseSmemBytes = readInt32Global(dense, "mla_dense_decode_smem_bytes", deviceOrdinal)[0];
  const seesawSmemBytes = readInt32Global(seesaw, "mla_dense_seesaw_smem_bytes", deviceOrdinal)[0];
  const sparseSmemBytes = readInt32Global(sparse, "mla_sparse_decode_smem_bytes", deviceOrdinal)[0];
  const k: DecodeKernels = {
    sched: sched.getFunction("mla_sched_meta"),
    denseBf16: dense.getFunction("mla_dense_decode_bf16_sm90"),
    denseFp16: dense.getFunction("mla_dense_decode_fp16_sm90"),
    denseSmemBytes,
    seesawBf16: seesaw.getFunction("mla_dense_seesaw_bf16_sm90"),
    seesawFp16: seesaw.getFunction("mla_dense_seesaw_fp16_sm90"),
    seesawFastBf16: seesaw.getFunction("mla_dense_seesaw_fast_bf16_sm90"),
    seesawFastFp16: seesaw.getFunction("mla_dense_seesaw_fast_fp16_sm90"),
    seesawSmemBytes,
    sparseBf16: sparse.getFunction("mla_sparse_decode_bf16_sm90"),
    sparseCrossoverBf16: sparse.getFunction("mla_sparse_decode_crossover_bf16_sm90"),
    sparseSmemBytes,
    combineBf16: combine.getFunction("mla_combine_bf16"),
    combineFp16: combine.getFunction("mla_combine_fp16"),
    fp8KvWrite: fp8.getFunction("fp8_kv_write_v32"),
    referenceFp32: ref.getFunction("mla_dense_reference_fp32"),
    sparseReferenceFp32: ref.getFunction("mla_sparse_reference_fp32"),
  };
  k.denseBf16.maxDynamicSharedMemory = denseSmemBytes;
  k.denseFp16.maxDynamicSharedMemory = denseSmemBytes;
  k.seesawBf16.maxDynamicSharedMemory = seesawSmemBytes;
  k.sparseBf16.maxDynamicSharedMemory = sparseSmemBytes;
  k.sparseCrossoverBf16.maxDynamicSharedMemory = sparseSmemBytes;
  k.seesawFp16.maxDynamicSharedMemory = seesawSmemBytes;
  k.seesawFastBf16.maxDynamicSharedMemory = seesawSmemBytes;
  k.seesawFastFp16.maxDynamicSharedMemory = seesawSmemBytes;
  cache.set(deviceOrdinal, k);
  return k;
}
