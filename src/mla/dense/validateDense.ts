import { ArgumentError, formatGot, formatShape } from "../../errors/ArgumentError.js";
import { MODEL1_D_QK } from "../../numeric/kvCacheModel1.js";
import type { Tensor } from "../../runtime/Tensor.js";
import type { FlashMlaWithKvcacheArgs } from "../args.js";
import { checkSameDevice, checkScalar, checkStream, checkTensor } from "../checkTensor.js";
import { DENSE_PAGE_BLOCK_SIZE, D_QK, D_V, MAX_GRID_YZ } from "../contract/shape.js";
import { MlaSchedMeta } from "../sched/MlaSchedMeta.js";
import { refuseV4Args } from "../sparse/validateSparse.js";

const FN = "flashMlaWithKvcache";

/** A checked dense call, in the kernel's words. */
export interface DenseShape {
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  /**
   * q's and each cached row's dims: 576 (DeepSeek-V3's head, V the first 512 dims) or 512 (DeepSeek-V4's,
   * V the whole row).
   */
  d_qk: number;
  num_blocks: number;
  max_blocks_per_seq: number;
  softmax_scale: number;
  /** Already false when s_q = 1. */
  causal: boolean;
}

/** A checked dense call: its shape and its tensors. */
export interface DenseCall extends DenseShape {
  q: Tensor;
  kCache: Tensor;
  blockTable: Tensor;
  cacheSeqlens: Tensor;
}

/**
 * Validates every argument of the dense path before anything touches the GPU, throwing an ArgumentError
 * naming the argument, what was expected and what was given. `requireCuda = false` checks everything but
 * residency, so host tensors can stand in for GPU ones (tests). `fn` names the public function in
 * messages (the fp32 GPU reference shares these checks).
 */
export function validateDenseArgs(a: FlashMlaWithKvcacheArgs, requireCuda = true, fn = FN): DenseCall {
  if (a === null || typeof a !== "object") throw new ArgumentError(fn, "args", "an options object", formatGot(a));
  refuseV4Args(a, fn);
  // Only a boolean: FlashMLA's Python reads any falsy value as false, which would hide a mistyped flag.
  if (a.isFp8Kvcache !== undefined && typeof a.isFp8Kvcache !== "boolean") throw new ArgumentError(fn, "isFp8Kvcache", "a boolean or undefined", formatGot(a.isFp8Kvcache));
  if (a.indices !== undefined || a.isFp8Kvcache || a.topkLength !== undefined || a.attnSink !== undefined) {
    throw new ArgumentError(fn, a.indices !== undefined ? "indices" : a.isFp8Kvcache ? "isFp8Kvcache" : a.topkLength !== undefined ? "topkLength" : "attnSink",
      "the dense path here (isFp8Kvcache, topkLength and attnSink belong to a sparse call, which passes indices)", "a sparse argument");
  }
  const device = requireCuda ? ("cuda" as const) : undefined;
  const q = checkTensor(fn, "q", a.q, { dtypes: ["bf16", "fp16"], shape: [undefined, undefined, undefined, undefined], dims: ["b", "s_q", "h_q", "d_qk"], lastDimContiguous: true, alignBytes: 16, device });
  const [b, s_q, h_q, d_qk] = q.shape;
  if (d_qk !== D_QK && d_qk !== MODEL1_D_QK) {
    throw new ArgumentError(fn, "q", `d_qk = ${D_QK} (DeepSeek-V3's head) or ${MODEL1_D_QK} (DeepSeek-V4's) on the dense path`, `${d_qk} (shape ${formatShape(q.shape)})`);
  }
  if (b < 1) throw new ArgumentError(fn, "q", `b >= 1 (shape [b, s_q, h_q, ${d_qk}])`, `b = ${b}`);
  if (s_q < 1) throw new ArgumentError(fn, "q", "s_q >= 1", `s_q = ${s_q}`);
  if (h_q < 1) throw new ArgumentError(fn, "q", "h_q >= 1", `h_q = ${h_q}`);
  // The combine kernel's grid is (rows, h_kv, b).
  if (b > MAX_GRID_YZ) throw new ArgumentError(fn, "q", `b <= ${MAX_GRID_YZ} (a launch grid dimension)`, `b = ${b}`);
  const kCache = checkTensor(fn, "kCache", a.kCache, { dtypes: [q.dtype], shape: [undefined, undefined, undefined, undefined], dims: ["num_blocks", "page_block_size", "h_kv", "d_qk"], lastDimContiguous: true, alignBytes: 16, device });
  // Each cached row holds the head q has: a 576-wide cache under a 512-wide q (or the reverse) is refused.
  if (kCache.shape[3] !== d_qk) {
    throw new ArgumentError(fn, "kCache", `d_qk = ${d_qk}, q's (the dense path takes ${D_QK} or ${MODEL1_D_QK}, the same in q and kCache)`, `${kCache.shape[3]} (shape ${formatShape(kCache.shape)})`);
  }
  if (kCache.shape[1] !== DENSE_PAGE_BLOCK_SIZE) throw new ArgumentError(fn, "kCache", `page_block_size = ${DENSE_PAGE_BLOCK_SIZE} (dense decode pages hold 64 tokens)`, `${kCache.shape[1]}`);
  const h_kv = kCache.shape[2];
  if (h_kv < 1 || h_q % h_kv !== 0) throw new ArgumentError(fn, "kCache", `h_kv >= 1 dividing h_q = ${h_q}`, `h_kv = ${h_kv}`);
  if (h_kv > MAX_GRID_YZ) throw new ArgumentError(fn, "kCache", `h_kv <= ${MAX_GRID_YZ} (a launch grid dimension)`, `h_kv = ${h_kv}`);
  if (kCache.shape[0] < 1) throw new ArgumentError(fn, "kCache", "num_blocks >= 1", `${kCache.shape[0]}`);
  if (a.blockTable === undefined) throw new ArgumentError(fn, "blockTable", "an int32 tensor [b, max_blocks_per_seq] (dense decode)", "undefined");
  const blockTable = checkTensor(fn, "blockTable", a.blockTable, { dtypes: ["i32"], shape: [b, undefined], dims: ["b", "max_blocks_per_seq"], lastDimContiguous: true, device });
  if (a.cacheSeqlens === undefined) throw new ArgumentError(fn, "cacheSeqlens", "an int32 tensor [b] (dense decode)", "undefined");
  const cacheSeqlens = checkTensor(fn, "cacheSeqlens", a.cacheSeqlens, { dtypes: ["i32"], shape: [b], dims: ["b"], contiguous: true, device });
  checkScalar(fn, "headDimV", a.headDimV, (v) => v === D_V, `${D_V}`);
  const softmax_scale = a.softmaxScale === undefined ? 1 / Math.sqrt(d_qk) : checkScalar(fn, "softmaxScale", a.softmaxScale, (v) => Number.isFinite(v) && v > 0, "a finite number > 0");
  if (a.causal !== undefined && typeof a.causal !== "boolean") throw new ArgumentError(fn, "causal", "a boolean", typeof a.causal);
  if (!(a.schedMeta instanceof MlaSchedMeta)) throw new ArgumentError(fn, "schedMeta", "the object getMlaMetadata() returns", formatGot(a.schedMeta));
  // Metadata filled on one GPU holds that GPU's pointers; another GPU's kernels must not read them.
  const metaOrdinal = a.schedMeta.deviceOrdinal;
  if (metaOrdinal !== undefined && q.isCuda && metaOrdinal !== q.deviceOrdinal) {
    throw new ArgumentError(fn, "schedMeta", `metadata filled on q's device (${q.device})`, `metadata filled on cuda:${metaOrdinal}`);
  }
  checkStream(fn, a.stream, { name: "q", tensor: q });
  if (a.out !== undefined) checkTensor(fn, "out", a.out, { dtypes: [q.dtype], shape: [b, s_q, h_q, D_V], dims: ["b", "s_q", "h_q", "d_v"], contiguous: true, alignBytes: 16, device });
  if (a.lse !== undefined) checkTensor(fn, "lse", a.lse, { dtypes: ["f32"], shape: [b, h_q, s_q], dims: ["b", "h_q", "s_q"], contiguous: true, device });
  checkSameDevice(fn, { q, kCache, blockTable, cacheSeqlens, out: a.out, lse: a.lse });
  return {
    b, s_q, h_q, h_kv, d_qk, num_blocks: kCache.shape[0], max_blocks_per_seq: blockTable.shape[1], softmax_scale, causal: s_q > 1 && a.causal === true,
    q, kCache, blockTable, cacheSeqlens,
  };
}
