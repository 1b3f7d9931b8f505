import { NoGpuError } from "../errors/NoGpuError.js";
import { Device } from "../runtime/Device.js";
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
  /** seesaw_pipe with the K tiles multicast to the two m-block CTAs of a (2, 1, 1) cluster. */
  seesawMcBf16: Kernel;
  seesawMcFp16: Kernel;
  seesawPipeBf16: Kernel;
  seesawPipeFp16: Kernel;
  seesawSmemBytes: number;
  /** "h16" (experimental): the transposed kernel for at most 16 rows per KV head, 128 threads. */
  h16Bf16: Kernel;
  h16Fp16: Kernel;
  h16SmemBytes: number;
  sparseBf16: Kernel;
  sparseCrossoverBf16: Kernel;
  /** The same two with the second producer (coalesced per-token loads), while it is measured. */
  sparseV2Bf16: Kernel;
  sparseCrossoverV2Bf16: Kernel;
  /** Two producer warpgroups, 512 threads, no crossover (producer v3, the default). */
  sparseV3Bf16: Kernel;
  /** The same with crossover (the two producer warpgroups split the dims of this CTA's half; the default at h_q = 128). */
  sparseCrossoverV3Bf16: Kernel;
  /** The h16 consumer (tokens as wgmma's M, h_q <= 16) with the v3 producers, 512 threads (experimental). */
  sparseH16Bf16: Kernel;
  sparseSmemBytes: number;
  /** h16x (the default at h_q <= 16): tokens by bulk copy, FP8 converted by two consumer warpgroups, 512 threads. */
  sparseH16xBf16: Kernel;
  sparseH16xSmemBytes: number;
  /** The sparse kernels' e4m3 -> bf16 dequantization alone (an exhaustive GPU test checks it). */
  sparseDequantSelftest: Kernel;
  combineBf16: Kernel;
  combineFp16: Kernel;
  fp8KvWrite: Kernel;
  referenceFp32: Kernel;
  sparseReferenceFp32: Kernel;
}

const cache = new Map<number, DecodeKernels>();

function readInt32Global(mod: Module, name: string): Int32Array {
  const bytes = mod.readGlobal(name);
  return new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

/** Loads one cubin and checks each params table it exports against its host mirror. */
function loadChecked(name: string, deviceOrdinal: number, layouts: ReadonlyArray<readonly [string, CStruct<string>]>): Module {
  const mod = Module.load(name, { deviceOrdinal });
  for (const [symbol, struct] of layouts) struct.checkLayout(readInt32Global(mod, symbol));
  return mod;
}

/** The entry points of a module that share one dynamic shared-memory size (the module's `smemSymbol`), raised to it. */
function withSmem(mod: Module, smemSymbol: string, names: readonly string[]): { kernels: Kernel[]; smemBytes: number } {
  const smemBytes = readInt32Global(mod, smemSymbol)[0];
  const kernels = names.map((n) => mod.getFunction(n));
  for (const k of kernels) k.maxDynamicSharedMemory = smemBytes;
  return { kernels, smemBytes };
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
  const d = deviceOrdinal;
  const sched = loadChecked("sched_meta", d, [["sched_params_layout", SchedParamsStruct]]);
  const dense = loadChecked("dense_decode_sm90", d, [["dense_params_layout", DenseParamsStruct]]);
  const seesaw = loadChecked("dense_seesaw_sm90", d, [["dense_seesaw_params_layout", DenseParamsStruct]]);
  const sparse = loadChecked("sparse_decode_sm90", d, [["sparse_params_layout", SparseParamsStruct]]);
  const combine = loadChecked("combine", d, [["combine_params_layout", CombineParamsStruct]]);
  const fp8 = loadChecked("fp8_kv_writer", d, [["fp8_kv_write_params_layout", Fp8KvWriteParamsStruct]]);
  const ref = loadChecked("reference_fp32", d, [["ref_params_layout", RefParamsStruct], ["sparse_ref_params_layout", SparseRefParamsStruct]]);

  const v1 = withSmem(dense, "mla_dense_decode_smem_bytes", ["mla_dense_decode_bf16_sm90", "mla_dense_decode_fp16_sm90"]);
  const ss = withSmem(seesaw, "mla_dense_seesaw_smem_bytes", [
    "mla_dense_seesaw_bf16_sm90",
    "mla_dense_seesaw_fp16_sm90",
    "mla_dense_seesaw_fast_bf16_sm90",
    "mla_dense_seesaw_fast_fp16_sm90",
    "mla_dense_seesaw_mc_bf16_sm90",
    "mla_dense_seesaw_mc_fp16_sm90",
    "mla_dense_seesaw_pipe_bf16_sm90",
    "mla_dense_seesaw_pipe_fp16_sm90",
  ]);
  const h16 = withSmem(seesaw, "mla_dense_h16_smem_bytes", ["mla_dense_h16_bf16_sm90", "mla_dense_h16_fp16_sm90"]);
  const sp = withSmem(sparse, "mla_sparse_decode_smem_bytes", [
    "mla_sparse_decode_bf16_sm90",
    "mla_sparse_decode_crossover_bf16_sm90",
    "mla_sparse_decode_v2_bf16_sm90",
    "mla_sparse_decode_crossover_v2_bf16_sm90",
    "mla_sparse_decode_v3_bf16_sm90",
    "mla_sparse_decode_crossover_v3_bf16_sm90",
    "mla_sparse_decode_h16_bf16_sm90",
  ]);
  const h16x = withSmem(sparse, "mla_sparse_h16x_smem_bytes", ["mla_sparse_decode_h16x_bf16_sm90"]);
  const k: DecodeKernels = {
    sched: sched.getFunction("mla_sched_meta"),
    denseBf16: v1.kernels[0],
    denseFp16: v1.kernels[1],
    denseSmemBytes: v1.smemBytes,
    seesawBf16: ss.kernels[0],
    seesawFp16: ss.kernels[1],
    seesawFastBf16: ss.kernels[2],
    seesawFastFp16: ss.kernels[3],
    seesawMcBf16: ss.kernels[4],
    seesawMcFp16: ss.kernels[5],
    seesawPipeBf16: ss.kernels[6],
    seesawPipeFp16: ss.kernels[7],
    seesawSmemBytes: ss.smemBytes,
    h16Bf16: h16.kernels[0],
    h16Fp16: h16.kernels[1],
    h16SmemBytes: h16.smemBytes,
    sparseBf16: sp.kernels[0],
    sparseCrossoverBf16: sp.kernels[1],
    sparseV2Bf16: sp.kernels[2],
    sparseCrossoverV2Bf16: sp.kernels[3],
    sparseV3Bf16: sp.kernels[4],
    sparseCrossoverV3Bf16: sp.kernels[5],
    sparseH16Bf16: sp.kernels[6],
    sparseSmemBytes: sp.smemBytes,
    sparseH16xBf16: h16x.kernels[0],
    sparseH16xSmemBytes: h16x.smemBytes,
    sparseDequantSelftest: sparse.getFunction("mla_sparse_dequant_selftest"),
    combineBf16: combine.getFunction("mla_combine_bf16"),
    combineFp16: combine.getFunction("mla_combine_fp16"),
    fp8KvWrite: fp8.getFunction("fp8_kv_write_v32"),
    referenceFp32: ref.getFunction("mla_dense_reference_fp32"),
    sparseReferenceFp32: ref.getFunction("mla_sparse_reference_fp32"),
  };
  cache.set(deviceOrdinal, k);
  return k;
}
