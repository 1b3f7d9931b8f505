import { test } from "node:test";
import assert from "node:assert/strict";

import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { makeSparseCase, type SparseCaseOptions } from "../../../src/testing/sparseCase.js";

// kvScale (used by the h16x range test in test/gpu/mla/sparseH16x.test.ts): a power of two moves the FP8 scales, the
// RoPE values and the outputs by exactly that factor and leaves the codes, the scores and the lse alone.
const OPTS: SparseCaseOptions = { seed: 77, b: 2, s_q: 2, h_q: 8, s_k: 150, topk: 64, pageBlockSize: 32, sink: true, invalidFraction: 0.1 };

test("kvScale 2^10: the same e4m3 codes, scales and RoPE 2^10 times larger, the same scores", () => {
  const k = 2 ** 10;
  const a = makeSparseCase(OPTS);
  const s = makeSparseCase({ ...OPTS, kvScale: k });
  assert.equal(s.softmaxScale, a.softmaxScale / k);
  const ba = a.kCache.host as Uint8Array;
  const bs = s.kCache.host as Uint8Array;
  assert.equal(ba.length, bs.length);
  const va = new DataView(ba.buffer, ba.byteOffset, ba.byteLength);
  const vs = new DataView(bs.buffer, bs.byteOffset, bs.byteLength);
  let tokens = 0;
  for (let t = 0; t + 656 <= ba.length; t += 656) {
    if (ba[t] === 0xff && ba[t + 512] === 0xff && ba[t + 655] === 0xff) {
      assert.deepEqual(bs.subarray(t, t + 656), ba.subarray(t, t + 656), `unreferenced token at byte ${t}`);
      continue;
    }
    tokens++;
    assert.deepEqual(bs.subarray(t, t + 512), ba.subarray(t, t + 512), `codes of the token at byte ${t}`);
    for (let g = 0; g < 4; g++) assert.equal(vs.getFloat32(t + 512 + 4 * g, true), va.getFloat32(t + 512 + 4 * g, true) * k, `scale ${g} at byte ${t}`);
    for (let r = 0; r < 64; r++) {
      const f = (v: DataView) => new Float32Array(new Uint32Array([v.getUint16(t + 528 + 2 * r, true) << 16]).buffer)[0]!;
      assert.equal(f(vs), f(va) * k, `RoPE ${r} at byte ${t}`);
    }
  }
  assert.ok(tokens > 100, `${tokens} referenced tokens`);
  const ra = mlaDecodeReference(a);
  const rs = mlaDecodeReference(s);
  assert.deepEqual(rs.lse.host, ra.lse.host);
  rs.outF32.forEach((v, i) => assert.equal(v, ra.outF32[i]! * k, `out ${i}`));
});

test("kvScale must be a positive finite number", () => {
  for (const kvScale of [0, -1, Infinity, NaN]) assert.throws(() => makeSparseCase({ ...OPTS, kvScale }), /argument 'opts.kvScale': expected a positive finite number/);
});
