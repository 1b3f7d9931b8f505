import { D_V } from "../../src/mla/contract/shape.js";
import type { ReferenceRow } from "../../src/mla/reference/mlaDecodeReference.js";
import { assertClose, type Tolerance } from "../../src/numeric/compare.js";

/**
 * Compares a decode's out [b, s_q, h_q, 512] and lse [b, h_q, s_q] with the reference: every element when
 * `rows` is undefined, else only those rows (gathered, so one tolerance check covers them all).
 * Throws on a mismatch; returns whether rows were sampled.
 */
export function assertDecodeClose(
  got: { out: Float32Array; lse: Float32Array },
  ref: { out: Float32Array; lse: Float32Array },
  dims: { b: number; s_q: number; h_q: number },
  rows: readonly ReferenceRow[] | undefined,
  tol: { out: Tolerance; lse: Tolerance },
  roundReferenceTo: "bf16" | "fp16",
): boolean {
  const { b, s_q, h_q } = dims;
  if (rows === undefined) {
    assertClose(got.out, ref.out, tol.out, { shape: [b, s_q, h_q, D_V], name: "out", roundReferenceTo });
    assertClose(got.lse, ref.lse, tol.lse, { shape: [b, h_q, s_q], name: "lse" });
    return false;
  }
  const a = new Float32Array(rows.length * D_V), r = new Float32Array(rows.length * D_V);
  const la = new Float32Array(rows.length), lr = new Float32Array(rows.length);
  rows.forEach(({ batch, token, head }, n) => {
    const base = ((batch * s_q + token) * h_q + head) * D_V;
    a.set(got.out.subarray(base, base + D_V), n * D_V);
    r.set(ref.out.subarray(base, base + D_V), n * D_V);
    la[n] = got.lse[(batch * h_q + head) * s_q + token];
    lr[n] = ref.lse[(batch * h_q + head) * s_q + token];
  });
  assertClose(a, r, tol.out, { shape: [rows.length, D_V], name: "out (sampled rows, see rowsToCheck)", roundReferenceTo });
  assertClose(la, lr, tol.lse, { name: "lse (sampled rows)" });
  return true;
}

/**
 * Compares as {@link assertDecodeClose}, with `label` in every message and sampled rows checked one at a
 * time: each row's cosine difference then stands on its own, stricter than over the gathered rows, and
 * a message names its row. The reference's out is rounded to `roundReferenceTo` (the output's dtype).
 * @default roundReferenceTo "bf16"
 */
export function assertDecodeRowsClose(
  got: { out: Float32Array; lse: Float32Array },
  ref: { out: Float32Array; lse: Float32Array },
  opts: {
    dims: { b: number; s_q: number; h_q: number };
    rows: readonly ReferenceRow[] | undefined;
    tol: { out: Tolerance; lse: Tolerance };
    label: string;
    roundReferenceTo?: "bf16" | "fp16";
  },
): void {
  const { dims: { b, s_q, h_q }, rows, tol, label, roundReferenceTo = "bf16" } = opts;
  if (rows === undefined) {
    assertClose(got.out, ref.out, tol.out, { shape: [b, s_q, h_q, D_V], name: `out (${label})`, roundReferenceTo });
    assertClose(got.lse, ref.lse, tol.lse, { shape: [b, h_q, s_q], name: `lse (${label})` });
    return;
  }
  for (const r of rows) {
    const base = ((r.batch * s_q + r.token) * h_q + r.head) * D_V;
    assertClose(got.out.subarray(base, base + D_V), ref.out.subarray(base, base + D_V), tol.out, { name: `out row ${JSON.stringify(r)} (${label})`, roundReferenceTo });
    const li = (r.batch * h_q + r.head) * s_q + r.token;
    assertClose([got.lse[li]], [ref.lse[li]], tol.lse, { name: `lse row ${JSON.stringify(r)} (${label})` });
  }
}
