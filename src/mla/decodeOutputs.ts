import type { DType } from "../runtime/dtype.js";
import { Tensor } from "../runtime/Tensor.js";
import { D_V } from "./contract/shape.js";

/**
 * out [b, s_q, h_q, 512] (`outDtype`) and lse [b, h_q, s_q] f32 of a decode call: the caller's where
 * given, else new ones on `ordinal`. If lse cannot be allocated, an out allocated here is freed before
 * the error propagates (a server retries such calls, and must not leak on each retry). `outShape`
 * replaces out's shape where a caller lays it out otherwise (the DCP merge's head chunks).
 */
export function decodeOutputs<D extends DType>(
  shape: { b: number; s_q: number; h_q: number },
  outDtype: D,
  ordinal: number,
  given: { out?: Tensor; lse?: Tensor } = {},
  outShape: readonly number[] = [shape.b, shape.s_q, shape.h_q, D_V],
): { out: Tensor<D>; lse: Tensor<"f32"> } {
  // The caller's validation has checked a given out's dtype against outDtype and a given lse's as f32.
  const out = (given.out as Tensor<D> | undefined) ?? Tensor.emptyDevice(outShape, outDtype, ordinal);
  try {
    return { out, lse: (given.lse as Tensor<"f32"> | undefined) ?? Tensor.emptyDevice([shape.b, shape.h_q, shape.s_q], "f32", ordinal) };
  } catch (e) {
    if (given.out === undefined) out.dispose();
    throw e;
  }
}
