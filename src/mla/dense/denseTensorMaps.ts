import type { Tensor } from "../../runtime/Tensor.js";
import { TensorMap } from "../../runtime/TensorMap.js";
import { BLOCK_M, DENSE_PAGE_BLOCK_SIZE } from "../contract/shape.js";

/** The tensor-map geometry of {@link denseQTensorMapView} and {@link denseKvTensorMapView}: what TensorMap.encodeTiled takes. */
export interface DenseQTensorMapView {
  globalDim: number[];
  globalStrides: number[];
  boxDim: number[];
}

/**
 * The main kernels' TMA view of q (DenseParams.tmap_q): {d_qk dims, heads_per_kv, h_kv, s_q, b}, one box =
 * one m-block (64 flattened rows of one KV head) x 64 dims, landing as the SW128 tiles (nine at d_qk 576,
 * eight at 512) the kernel's ld.global path writes. A box holds whole tokens' heads, so heads_per_kv must
 * divide 64 or be a multiple of it; otherwise (or with strides TMA cannot take) undefined, and the kernel
 * loads Q with ld.global. `qStrides` are q's element strides [b, s_q, h_q, d].
 */
export function denseQTensorMapView(shape: { b: number; s_q: number; h_kv: number; d_qk: number }, heads_per_kv: number, qStrides: readonly number[], elementSize: number): DenseQTensorMapView | undefined {
  if (heads_per_kv % BLOCK_M !== 0 && BLOCK_M % heads_per_kv !== 0) return undefined;
  const globalDim = [shape.d_qk, heads_per_kv, shape.h_kv, shape.s_q, shape.b];
  const globalStrides = [qStrides[2], heads_per_kv * qStrides[2], qStrides[1], qStrides[0]].map((s) => s * elementSize);
  // An extent-1 dimension's stride is never followed (a view may carry 0 there): give TMA a dense one.
  for (let i = 0; i < globalStrides.length; i++) {
    if (globalDim[i + 1] === 1) globalStrides[i] = i === 0 ? shape.d_qk * elementSize : globalStrides[i - 1] * globalDim[i];
  }
  if (globalStrides.some((s) => s <= 0 || s % 16 !== 0 || s >= 2 ** 40)) return undefined;
  return { globalDim, globalStrides, boxDim: [64, Math.min(heads_per_kv, BLOCK_M), 1, Math.max(1, BLOCK_M / heads_per_kv), 1] };
}

/** q's tensor map (DenseParams.tmap_q), or undefined where TMA cannot view it (the kernel then uses ld.global). */
export function encodeDenseQMap(q: Tensor, shape: { b: number; s_q: number; h_kv: number; d_qk: number }, heads_per_kv: number): Uint8Array | undefined {
  const view = denseQTensorMapView(shape, heads_per_kv, q.strides, q.elementSize);
  if (view === undefined) return undefined;
  return TensorMap.encodeTiled({ dataType: q.dtype === "bf16" ? "bf16" : "fp16", globalAddress: q.ptr, ...view, swizzle: "128B", deviceOrdinal: q.deviceOrdinal });
}

/**
 * The paged cache's TMA view (DenseParams.tmap_kv): [num_blocks, 64, h_kv, d_qk] viewed innermost first,
 * {d_qk dims, h_kv, 64 tokens, num_blocks}, one box = 64 tokens × 64 dims of one KV head (d_qk 576 or 512:
 * nine or eight boxes a token row). `kvStrides` are kCache's element strides [num_blocks, 64, h_kv, d].
 */
export function denseKvTensorMapView(shape: { h_kv: number; num_blocks: number; d_qk: number }, kvStrides: readonly number[], elementSize: number): DenseQTensorMapView {
  return {
    globalDim: [shape.d_qk, shape.h_kv, DENSE_PAGE_BLOCK_SIZE, shape.num_blocks],
    globalStrides: [kvStrides[2], kvStrides[1], kvStrides[0]].map((s) => s * elementSize),
    boxDim: [64, 1, DENSE_PAGE_BLOCK_SIZE, 1],
  };
}

/** The paged cache's tensor map (DenseParams.tmap_kv), as {@link denseKvTensorMapView} lays it out. */
export function encodeDenseKvMap(kCache: Tensor, shape: { h_kv: number; num_blocks: number; d_qk: number }): Uint8Array {
  return TensorMap.encodeTiled({
    dataType: kCache.dtype === "bf16" ? "bf16" : "fp16",
    globalAddress: kCache.ptr,
    ...denseKvTensorMapView(shape, kCache.strides, kCache.elementSize),
    swizzle: "128B",
    // A box row is 128 bytes of one token (rows 1152 bytes apart): on the H200 dense-mem-h16 took 287.4 µs
    // with 128-byte L2 promotion, 288.0 with none, 296.9 with 256 bytes.
    l2Promotion: "128B",
    deviceOrdinal: kCache.deviceOrdinal,
  });
}
