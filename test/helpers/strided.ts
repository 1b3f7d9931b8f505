import { Tensor } from "../../src/runtime/Tensor.js";

/**
 * A padded copy of a contiguous host tensor, viewed back to its shape with `strides`: `pad` elements of
 * `fill` after each run of `inner` elements (a strided q, padded KV blocks, strided index rows). The
 * fill makes a kernel that ignores the strides read poison.
 */
export function padded(t: Tensor, inner: number, pad: number, strides: readonly number[], fill: number): Tensor {
  const src = t.host as Uint16Array | Int32Array;
  const runs = src.length / inner;
  const dst = src instanceof Int32Array ? new Int32Array(runs * (inner + pad)) : new Uint16Array(runs * (inner + pad));
  dst.fill(fill);
  for (let r = 0; r < runs; r++) dst.set(src.subarray(r * inner, (r + 1) * inner), r * (inner + pad));
  return Tensor.fromHost(dst, [dst.length], t.dtype).view(t.shape, strides);
}

/**
 * A device copy of a host tensor's whole storage, viewed with the host view's shape and strides
 * (Tensor.toDevice would compact it: a MODEL1 cache's pages, padded rows). The copy's view starts at the
 * storage's start, so the host view must too.
 */
export function uploadStorage<T extends Tensor>(t: T): T {
  if (t.offset !== 0) throw new Error(`test bug: uploadStorage of a view at offset ${t.offset} (its copy would start at the storage's element 0)`);
  const store = Tensor.toDevice(Tensor.fromHost(t.host!, [t.host!.length], t.dtype));
  return store.view(t.shape, t.strides) as T;
}
