import assert from "node:assert/strict";
import { test } from "node:test";
import { ArgumentError } from "../../../../src/errors/ArgumentError.js";
import {
  mlaSparseReferenceGpu,
  validateSparseReferenceGpuArgs,
  type MlaSparseReferenceGpuArgs,
} from "../../../../src/mla/reference/mlaSparseReferenceGpu.js";
import { model1PageBytes } from "../../../../src/numeric/kvCacheModel1.js";
import { Tensor } from "../../../../src/runtime/Tensor.js";
import type { DType } from "../../../../src/runtime/dtype.js";
import { makeModel1Case } from "../../../../src/testing/model1Case.js";
import { makeSparseCase } from "../../../../src/testing/sparseCase.js";
import { rejectsWithMessage as rejects } from "../../../helpers/argumentError.js";

// The launcher's checks and what they resolve to, without a GPU (validateSparseReferenceGpuArgs with
// requireCuda = false); the kernel itself is checked against the CPU reference in test/gpu/mla.

const R = "mlaSparseReferenceGpu(): argument";
const host = (shape: readonly number[], dtype: DType) => Tensor.zerosHost(shape, dtype);

/** A MODEL1 cache view as the writer lays it out: [numBlocks, pbs, 1, 584] with block stride `stride`. */
function model1Cache(numBlocks: number, pbs: number, stride = model1PageBytes(pbs)): Tensor {
  return host([numBlocks * stride], "u8").view([numBlocks, pbs, 1, 584], [stride, 584, 584, 1]);
}

/** A valid MODEL1 call with a second cache: b = 2, s_q = 1, h_q = 8; pages of 4 and 2 tokens. */
function model1Call(over: Record<string, unknown> = {}): MlaSparseReferenceGpuArgs {
  return {
    q: host([2, 1, 8, 512], "bf16"),
    kCache: model1Cache(3, 4),
    indices: host([2, 1, 5], "i32"),
    extraKCache: model1Cache(6, 2),
    extraIndices: host([2, 1, 7], "i32"),
    isFp8Kvcache: true,
    headDimV: 512,
    ...over,
  } as MlaSparseReferenceGpuArgs;
}

test("validateSparseReferenceGpuArgs() resolves a V32 case as before: no second cache, model 0", () => {
  const c = makeSparseCase({ seed: 1, b: 2, s_q: 2, h_q: 16, s_k: 90, topk: 40, pageBlockSize: 7, topkLength: true, sink: true, blockPadTokens: 3 });
  const call = validateSparseReferenceGpuArgs({ ...c }, false);
  assert.equal(call.format, "V32");
  assert.equal(call.d_qk, 576);
  assert.equal(call.softmax_scale, c.softmaxScale);
  assert.deepEqual([call.b, call.s_q, call.h_q], [2, 2, 16]);
  assert.equal(call.main.block_stride_bytes, c.kCache.strides[0]);
  assert.equal(call.main.block_stride_bytes, (7 + 3) * 656);
  assert.equal(call.main.num_slots, c.kCache.shape[0] * 7);
  assert.equal(call.main.topk, 40);
  assert.equal(call.main.topk_length, c.topkLength);
  assert.equal(call.attn_sink, c.attnSink);
  assert.equal(call.extra, undefined);
  // Without softmaxScale, 1/sqrt(d_qk).
  assert.equal(validateSparseReferenceGpuArgs({ ...c, softmaxScale: undefined }, false).softmax_scale, 1 / Math.sqrt(576));
});

test("validateSparseReferenceGpuArgs() resolves a MODEL1 case with a second cache from q's d_qk 512", () => {
  const c = makeModel1Case({ seed: 2, b: 2, s_q: 2, h_q: 8, topk: 24, s_k: 100, pageBlockSize: 4, extra: { topk: 40, s_k: 120, pageBlockSize: 2, topkLengthRandom: true }, sink: true, topkLength: true });
  const call = validateSparseReferenceGpuArgs({ ...c }, false);
  assert.equal(call.format, "MODEL1");
  assert.equal(call.d_qk, 512);
  assert.equal(call.main.page_block_size, 4);
  assert.equal(call.main.block_stride_bytes, c.kCache.shape[0] > 1 ? c.kCache.strides[0] : 4 * 584);
  assert.ok(call.extra !== undefined);
  assert.equal(call.extra.kv, c.extraKCache);
  assert.equal(call.extra.indices, c.extraIndices);
  assert.equal(call.extra.topk_length, c.extraTopkLength);
  assert.equal(call.extra.topk, 40);
  assert.equal(call.extra.page_block_size, 2);
  assert.equal(call.extra.num_slots, c.extraKCache!.shape[0] * 2);
  assert.equal(validateSparseReferenceGpuArgs(model1Call(), false).softmax_scale, 1 / Math.sqrt(512));
  // A single page needs no stride: its tokens sit at fixed offsets from the base.
  const one = validateSparseReferenceGpuArgs(model1Call({ kCache: host([4 * 584], "u8").view([1, 4, 1, 584], [0, 584, 584, 1]) }), false);
  assert.equal(one.main.block_stride_bytes, 4 * 584);
  // A contiguous copy drops only each page's padding, so pages back to back at pbs · 584 are fine.
  assert.equal(validateSparseReferenceGpuArgs(model1Call({ kCache: host([3, 4, 1, 584], "u8") }), false).main.block_stride_bytes, 4 * 584);
});

test("validateSparseReferenceGpuArgs() names each wrong argument", () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["out given", { out: host([2, 1, 8, 512], "f32") }, `${R} 'out': expected undefined (the fp32 reference returns new f32 out and lse), got a value`],
    ["isFp8Kvcache missing", { isFp8Kvcache: undefined }, `${R} 'isFp8Kvcache': expected true (it reads an FP8 cache through indices), got undefined`],
    ["q d_qk 600", { q: host([2, 1, 8, 600], "bf16") }, `${R} 'q': expected last dim d_qk = 576 (the V32 cache) or 512 (the MODEL1 cache), got shape [2, 1, 8, 600]`],
    ["q fp16", { q: host([2, 1, 8, 512], "fp16") }, `${R} 'q': expected dtype bf16, got fp16`],
    ["q with padded heads", { q: host([2, 1, 8, 520], "bf16").view([2, 1, 8, 512], [8 * 520, 8 * 520, 520, 1]) }, `${R} 'q': expected a contiguous tensor (the fp32 reference reads it row-major), got strides [4160, 4160, 520, 1]`],
    ["a V32 cache under q's d_qk 512", { kCache: host([3, 4, 1, 656], "u8") }, `${R} 'kCache': expected last dim 584 (the MODEL1 format, which q's d_qk = 512 selects), got shape [3, 4, 1, 656]`],
    ["a V32 extra cache under q's d_qk 512", { extraKCache: host([3, 4, 1, 656], "u8") }, `${R} 'extraKCache': expected last dim 584 (the MODEL1 format, which q's d_qk = 512 selects), got shape [3, 4, 1, 656]`],
    ["MODEL1 pages that overlap", { kCache: model1Cache(3, 4, 4 * 584 - 16) }, `${R} 'kCache': expected a block stride >= page_block_size · 584 = 2336 bytes (pages that do not overlap), got strides [2320, 584, 584, 1]`],
    ["extra cache token stride 576", { extraKCache: host([6 * 2 * 584], "u8").view([6, 2, 1, 584], [1168, 576, 584, 1]) }, `${R} 'extraKCache': expected token stride 584 bytes (the tokens of a page back to back), got strides [1168, 576, 584, 1]`],
    ["extraIndices without extraKCache", { extraKCache: undefined }, `${R} 'extraKCache': expected a Tensor when extraIndices is given, got undefined`],
    ["extraKCache without extraIndices", { extraIndices: undefined }, `${R} 'extraIndices': expected a Tensor when extraKCache is given, got undefined`],
    ["extraTopkLength without a second cache", { extraKCache: undefined, extraIndices: undefined, extraTopkLength: host([2], "i32") }, `${R} 'extraTopkLength': expected undefined without extraKCache, got Tensor`],
    ["extraIndices for another s_q", { extraIndices: host([2, 2, 7], "i32") }, `${R} 'extraIndices': expected s_q = 1 (shape [2, 1, extra_topk]), got 2 (shape [2, 2, 7])`],
    ["extraIndices extra_topk 0", { extraIndices: host([2, 1, 0], "i32") }, `${R} 'extraIndices': expected extra_topk >= 1 (shape [b, s_q, extra_topk]), got extra_topk = 0`],
    ["extraIndices a column slice", { extraIndices: host([2, 1, 14], "i32").view([2, 1, 7], [14, 14, 1]) }, `${R} 'extraIndices': expected a contiguous tensor, got strides [14, 14, 1]`],
    ["extraTopkLength f32", { extraTopkLength: host([2], "f32") }, `${R} 'extraTopkLength': expected dtype i32, got f32`],
    ["extraTopkLength for b = 3", { extraTopkLength: host([3], "i32") }, `${R} 'extraTopkLength': expected b = 2 (shape [2]), got 3 (shape [3])`],
    ["attnSink for h_q = 4", { attnSink: host([4], "f32") }, `${R} 'attnSink': expected h_q = 8 (shape [8]), got 4 (shape [4])`],
  ];
  rejects("args null", () => validateSparseReferenceGpuArgs(null as unknown as MlaSparseReferenceGpuArgs, false), `${R} 'args': expected an options object, got null`);
  for (const [what, over, message] of cases) rejects(what, () => validateSparseReferenceGpuArgs(model1Call(over), false), message);
  // The public function refuses host tensors before it needs a driver.
  rejects("host q", () => mlaSparseReferenceGpu(model1Call()), `${R} 'q': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`);
});
