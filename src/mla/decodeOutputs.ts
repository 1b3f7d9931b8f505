import type { DType } from "../runtime/dtype.js";
import { Tensor } from "../runtime/Tensor.js";
import { D_V } from "./contract/shape.js";

/**
 * out [b, s_q, h_q, 512] (`outDtype`) and lse [b, h_q, s_q] f32 of a decode call: the caller's where
 * given, else new ones on `ordinal`. If lse cannot be allocated, an out allocated here is freed before
 * the error propagates (a server retries such calls, and must not leak on each retry).
 */
export function decodeOutputs(
  shape: { b: number; s_q: number; h_q: number },
  outDtype: DType,
  ordinal: number,
  given: { out?: Tensor; lse?: Tensor } = {},
): { out: Tensor; lse: Tensor } {
  const out = given.out ?? Tensor.emptyDevice([shape.b, shape.s_q, shape.h_q, D_V], outDtype, ordinal);
  try {
    return { out, lse: given.lse ?? Tensor.emptyDevice([shape.b, shape.h_q, shape.s_q], "f32", ordinal) };
  } catch (e) {
    if (given.out === undefined) out.dispose();
    throw e;
  }
}
