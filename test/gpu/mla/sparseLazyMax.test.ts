import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeWithOverrides } from "../../../src/mla/flashMlaWithKvcache.js";
import { chooseSparseKernel, planFitsHeads, SPARSE_PLANS, type SparsePlan } from "../../../src/mla/sparse/chooseSparseKernel.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { computeSchedule, decodePart, numKvBlocks, numSmPartsSparse, sparseScheduleLengths } from "../../../src/mla/sched/schedule.js";
import { bf16ArrayToF32, bf16BitsToF32, f64ToBf16Bits } from "../../../src/numeric/bf16.js";
import { assertClose, SPARSE_LSE_TOL, SPARSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { D_NOPE, D_QK, D_ROPE, FP8_TILE, FP8_TOKEN_BYTES, dequantizeKvTokenV32 } from "../../../src/numeric/kvCacheFp8.js";
import { Rng } from "../../../src/numeric/random.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { BLOCK_N } from "../../../src/mla/contract/shape.js";
import { makeSparseCase, type SparseCase } from "../../../src/testing/sparseCase.js";

// The sparse consumers keep a lazy running max: a row's max moves only when a block's row max (64 consecutive index entries) exceeds it by more than
// τ = 8 log2 units, so P may reach 2^8. Random inputs never move the max by that much after the first block,
// so this case makes them, as test/gpu/mla/lazyMax.test.ts does for the dense kernels: the RoPE dims (not
// part of V, and stored as raw bf16 in the V32 cache, so the FP8 latent bytes stay as quantized) of q are
// scaled up, and those of each index block's tokens by their own factor e^U(0,5). The rows must see both
// paths (a rescale mid-piece, and a smaller rise that is kept) in the pieces of the index lists the SM
// parts actually run, at h_q = 128 (h128x and m64) and h_q = 16 (h16x, and m64 with rows masked).

/** τ of the lazy running max, log2 units. */
const TAU = 8;
/** The kernels' initial running max (M_INIT). */
const M_INIT = -1e30;
const S_Q = 2;
/**
 * Factor on q's RoPE dims. The sparse cases draw q from N(0,1) (the dense ones from N(0,1)/10) and scale
 * scores by 576^-0.55, so ×5 gives block maxima of about 0.3 to 55 log2 units: the dense test's range
 * (its ×30 on q/10 gives 0.4 to 50); ×30 here would give up to ~330.
 */
const Q_ROPE_SCALE = 5;
/** Byte offset of the 64 bf16 RoPE values in a 656-byte V32 token: after 512 e4m3 codes and 4 f32 scales. */
const ROPE_BYTE = D_NOPE + 4 * (D_NOPE / FP8_TILE);

/** A jumping case: b requests of topk tokens each; every 64-entry index block reads one group of 64 tokens. */
interface JumpingCaseOptions {
  seed: number;
  b: number;
  h_q: number;
  /** Also each request's length; a multiple of 64. */
  topk: number;
  pageBlockSize: number;
}

interface JumpingCase {
  c: SparseCase;
  /** [num_slots] the group (request · topk/64 + g) of each token, −1 for tokens no index names (the poisoned spare block). */
  groupOf: Int32Array;
  /** [b · topk/64] each group's factor on its tokens' RoPE dims. */
  factor: Float64Array;
  /** The cache bytes before the RoPE scaling. */
  before: Uint8Array;
}

/** Byte offset of token `id` in the cache, as mlaDecodeReference's sparse reader computes it. */
function tokenByte(kCache: Tensor, pageBlockSize: number, id: number): number {
  return kCache.offset + Math.floor(id / pageBlockSize) * kCache.strides[0] + (id % pageBlockSize) * FP8_TOKEN_BYTES;
}

/**
 * makeSparseCase with s_k = topk (so each index row names each of its request's tokens once, and no token of
 * a request is poisoned), then: the groups are the 64-entry chunks of row (i, 0); every row (i, j) is rewritten
 * to read the groups in its own random order, one group per index block, shuffled inside the block; each
 * group's RoPE bf16 bytes are scaled by its factor e^U(0,5) in the cache itself (what the kernels and the
 * reference both read); q's RoPE dims are scaled by Q_ROPE_SCALE.
 */
function makeJumpingCase(o: JumpingCaseOptions): JumpingCase {
  const { seed, b, h_q, topk, pageBlockSize } = o;
  assert.equal(topk % BLOCK_N, 0, "topk must be a multiple of 64");
  const c = makeSparseCase({ seed, b, s_q: S_Q, h_q, s_k: topk, topk, pageBlockSize });
  const rng = new Rng(seed + 1);
  const nblk = topk / BLOCK_N;
  const indices = c.indices.host as Int32Array; // [b, s_q, topk]
  const bytes = c.kCache.host as Uint8Array;
  const before = bytes.slice();
  const groupOf = new Int32Array(c.kCache.shape[0] * pageBlockSize).fill(-1);
  const factor = new Float64Array(b * nblk);
  for (let i = 0; i < b; i++) {
    const row0 = indices.slice(i * S_Q * topk, (i * S_Q + 1) * topk);
    for (let g = 0; g < nblk; g++) {
      factor[i * nblk + g] = Math.exp(5 * rng.uniform());
      for (let t = 0; t < BLOCK_N; t++) {
        const id = row0[g * BLOCK_N + t];
        assert.ok(id >= 0 && groupOf[id] === -1, `request ${i}: index row 0 should name each of its ${topk} tokens once (entry ${g * BLOCK_N + t} is ${id})`);
        groupOf[id] = i * nblk + g;
      }
    }
    for (let j = 0; j < S_Q; j++) {
      const order = rng.permutation(nblk);
      for (let k = 0; k < nblk; k++) {
        const block = rng.shuffle(Array.from(row0.subarray(order[k] * BLOCK_N, (order[k] + 1) * BLOCK_N)));
        indices.set(block, (i * S_Q + j) * topk + k * BLOCK_N);
      }
    }
  }
  for (let id = 0; id < groupOf.length; id++) {
    if (groupOf[id] < 0) continue;
    const at = tokenByte(c.kCache, pageBlockSize, id) + ROPE_BYTE;
    for (let d = 0; d < D_ROPE; d++) {
      const bits = f64ToBf16Bits(factor[groupOf[id]] * bf16BitsToF32(bytes[at + 2 * d] | (bytes[at + 2 * d + 1] << 8)));
      bytes[at + 2 * d] = bits & 0xff;
      bytes[at + 2 * d + 1] = bits >>> 8;
    }
  }
  const q = c.q.host as Uint16Array; // [b, s_q, h_q, 576], contiguous from 0
  for (let x = 0; x < q.length; x++) if (x % D_QK >= D_NOPE) q[x] = f64ToBf16Bits(Q_ROPE_SCALE * bf16BitsToF32(q[x]));
  return { c, groupOf, factor, before };
}

/**
 * Host checks of the case itself: through the reference's own reader (dequantizeKvTokenV32), each named
 * token's RoPE dims are its group's factor times the drawn values and its latent dims are unchanged; no
 * other byte of the cache changed; every index block of every row reads exactly one whole group, and each
 * row reads each of its request's groups once.
 */
function checkJumpingCase(jc: JumpingCase, o: JumpingCaseOptions): void {
  const { c, groupOf, factor, before } = jc;
  const { b, topk, pageBlockSize } = o;
  const nblk = topk / BLOCK_N;
  const bytes = c.kCache.host as Uint8Array;
  const now = new Uint16Array(D_QK), was = new Uint16Array(D_QK);
  const ropeBytes = new Uint8Array(bytes.length); // 1 where a named token's RoPE bytes lie
  for (let id = 0; id < groupOf.length; id++) {
    if (groupOf[id] < 0) continue;
    const at = tokenByte(c.kCache, pageBlockSize, id);
    ropeBytes.fill(1, at + ROPE_BYTE, at + FP8_TOKEN_BYTES);
    dequantizeKvTokenV32(bytes, at, now, 0);
    dequantizeKvTokenV32(before, at, was, 0);
    for (let d = 0; d < D_NOPE; d++) assert.equal(now[d], was[d], `token ${id}: latent dim ${d} changed`);
    for (let d = D_NOPE; d < D_QK; d++) {
      const want = f64ToBf16Bits(factor[groupOf[id]] * bf16BitsToF32(was[d]));
      assert.equal(now[d], want, `token ${id}: RoPE dim ${d} reads ${bf16BitsToF32(now[d])}, expected ${bf16BitsToF32(want)}`);
    }
  }
  for (let x = 0; x < bytes.length; x++) if (bytes[x] !== before[x]) assert.equal(ropeBytes[x], 1, `cache byte ${x} changed outside the RoPE bytes of a named token`);
  const indices = c.indices.host as Int32Array;
  for (let i = 0; i < b; i++) {
    for (let j = 0; j < S_Q; j++) {
      const seen = new Set<number>();
      for (let k = 0; k < nblk; k++) {
        const at = (i * S_Q + j) * topk + k * BLOCK_N;
        const g = groupOf[indices[at]];
        assert.ok(g >= i * nblk && g < (i + 1) * nblk && !seen.has(g), `row (${i}, ${j}) block ${k}: group ${g} is not a new group of request ${i}`);
        seen.add(g);
        const ids = new Set(indices.subarray(at, at + BLOCK_N));
        assert.equal(ids.size, BLOCK_N, `row (${i}, ${j}) block ${k} repeats a token`);
        for (const id of ids) assert.equal(groupOf[id], g, `row (${i}, ${j}) block ${k} mixes groups`);
      }
    }
  }
}

/** How often a block's row max rises above the running max by more than τ (a rescale) and by less (kept). */
interface RiseCounts {
  /** In the pieces of the index lists the SM parts run (the running max starts afresh in each piece). */
  jumps: number;
  small: number;
  /** Over whole index lists, as without splits. */
  wholeJumps: number;
  wholeSmall: number;
  parts: number;
}

/**
 * The kernel's running-max rule replayed on the host for the rows of `heads`: block maxima of
 * scale_log2 · q·k over the dequantized keys (float64), the max moved only on a rise above τ, in the pieces
 * of the schedule computeSchedule gives for `smCount` SMs (the CPU twin of the GPU scheduler).
 */
function countRises(jc: JumpingCase, o: JumpingCaseOptions, heads: readonly number[], smCount: number): RiseCounts {
  const { c, groupOf } = jc;
  const { b, h_q, topk, pageBlockSize } = o;
  const nblk = topk / BLOCK_N;
  const bytes = c.kCache.host as Uint8Array;
  const keys = new Float32Array(groupOf.length * D_QK); // [num_slots, 576], named tokens only
  const bits = new Uint16Array(D_QK);
  for (let id = 0; id < groupOf.length; id++) {
    if (groupOf[id] < 0) continue;
    dequantizeKvTokenV32(bytes, tokenByte(c.kCache, pageBlockSize, id), bits, 0);
    keys.set(bf16ArrayToF32(bits), id * D_QK);
  }
  const q = bf16ArrayToF32(c.q.host as Uint16Array); // [b, s_q, h_q, 576]
  const indices = c.indices.host as Int32Array;
  const scaleLog2 = c.softmaxScale * Math.LOG2E;
  // blockMax[((i · s_q + j) · heads + n) · nblk + blk]
  const blockMax = new Float64Array(b * S_Q * heads.length * nblk);
  for (let i = 0; i < b; i++) {
    for (let j = 0; j < S_Q; j++) {
      heads.forEach((h, n) => {
        const qb = ((i * S_Q + j) * h_q + h) * D_QK;
        for (let blk = 0; blk < nblk; blk++) {
          let mx = -Infinity;
          for (let t = 0; t < BLOCK_N; t++) {
            const kb = indices[(i * S_Q + j) * topk + blk * BLOCK_N + t] * D_QK;
            let dot = 0;
            for (let d = 0; d < D_QK; d++) dot += q[qb + d] * keys[kb + d];
            mx = Math.max(mx, scaleLog2 * dot);
          }
          blockMax[((i * S_Q + j) * heads.length + n) * nblk + blk] = mx;
        }
      });
    }
  }
  const tally = { jumps: 0, small: 0 };
  const replay = (i: number, start: number, end: number, into: { jumps: number; small: number }) => {
    for (let r = 0; r < S_Q * heads.length; r++) {
      const base = (i * S_Q * heads.length + r) * nblk;
      let m = M_INIT;
      for (let blk = start; blk < end; blk++) {
        const bm = blockMax[base + blk];
        if (blk > start && bm > m + TAU) into.jumps++;
        else if (blk > start && bm > m) into.small++;
        if (bm > m + TAU) m = bm;
      }
    }
  };
  const whole = { jumps: 0, small: 0 };
  for (let i = 0; i < b; i++) replay(i, 0, nblk, whole);
  const parts = numSmPartsSparse(smCount, S_Q, h_q);
  const lengths = sparseScheduleLengths(topk, undefined, b);
  const { schedMeta } = computeSchedule(lengths, parts);
  for (let part = 0; part < parts; part++) {
    const p = decodePart(schedMeta, part);
    if (p.beginReq >= b) continue;
    for (let i = p.beginReq; i <= p.endReq; i++) replay(i, i === p.beginReq ? p.beginBlock : 0, i === p.endReq ? p.endBlock : numKvBlocks(lengths[i]), tally);
  }
  return { ...tally, wholeJumps: whole.jumps, wholeSmall: whole.small, parts };
}

/** Every sparse plan that runs h_q heads (the API's among them). */
function sparsePlansFor(h_q: number): SparsePlan[] {
  return SPARSE_PLANS.filter((p) => planFitsHeads(p, h_q));
}

const CASES: JumpingCaseOptions[] = [
  // 6 requests × 16 blocks over 33 parts on 132 SMs: pieces of about 4 blocks.
  { seed: 1300, b: 6, h_q: 128, topk: 1024, pageBlockSize: 64 },
  // 16 requests × 16 blocks over 66 parts: pieces of about 6 blocks; one 64-row tile with rows 16..63 masked.
  { seed: 1301, b: 16, h_q: 16, topk: 1024, pageBlockSize: 61 },
];

describeGpu("sparse lazy running max", (device) => {
  for (const o of CASES) {
    const plans = sparsePlansFor(o.h_q);
    test(`${plans.join(", ")} match the CPU reference when block maxima jump up and down (h_q ${o.h_q})`, (t) => {
      assert.ok(plans.includes(chooseSparseKernel(o.h_q)), "the API's plan is among them");
      const jc = makeJumpingCase(o);
      checkJumpingCase(jc, o);
      const { c } = jc;
      // Both paths reached (heads 0, h_q/16, 2·h_q/16, ...; both query rows of every request).
      const heads = Array.from({ length: 16 }, (_, n) => (n * o.h_q) / 16);
      const n = countRises(jc, o, heads, device.smCount);
      t.diagnostic(`${n.parts} SM parts: ${n.jumps} rises by > ${TAU} and ${n.small} by less within pieces (${n.wholeJumps} and ${n.wholeSmall} over whole lists)`);
      assert.ok(n.jumps > 0 && n.small > 0, `expected block maxima that rise above the running max by > ${TAU} and by less within the parts' pieces, got ${n.jumps} and ${n.small} (${n.parts} parts; ${n.wholeJumps} and ${n.wholeSmall} over whole lists)`);
      const ref = mlaDecodeReference({ ...c });
      const dev = { q: Tensor.toDevice(c.q, device.ordinal), kCache: Tensor.toDevice(c.kCache, device.ordinal), indices: Tensor.toDevice(c.indices, device.ordinal) };
      try {
        for (const sparsePlan of plans) {
          const meta = getMlaMetadata();
          try {
            const r = decodeWithOverrides({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale, schedMeta: meta }, { sparsePlan });
            try {
              const got = bf16ArrayToF32(r.out.toHost().host as Uint16Array);
              assertClose(got, ref.outF32, SPARSE_OUT_TOL, { shape: [o.b, S_Q, o.h_q, 512], name: `${sparsePlan} out, jumping maxima (h_q ${o.h_q})`, roundReferenceTo: "bf16" });
              assertClose(r.lse.toHost().host as Float32Array, ref.lse.host as Float32Array, SPARSE_LSE_TOL, { shape: [o.b, o.h_q, S_Q], name: `${sparsePlan} lse, jumping maxima (h_q ${o.h_q})` });
            } finally {
              r.out.dispose();
              r.lse.dispose();
            }
          } finally {
            meta.dispose();
          }
        }
      } finally {
        for (const x of Object.values(dev)) x.dispose();
      }
    });
  }
});
