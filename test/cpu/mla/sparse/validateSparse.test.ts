import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../../src/errors/ArgumentError.js";
import { decodeWithOverrides, flashMlaWithKvcache, type DecodeOverrides } from "../../../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata, MlaSchedMeta } from "../../../../src/mla/sched/MlaSchedMeta.js";
import { referenceArgs } from "../../../../src/mla/reference/referenceArgs.js";
import { isSparseCall, validateSparseArgs } from "../../../../src/mla/sparse/validateSparse.js";
import { checkPlanFitsHeads, chooseSparseKernel, sparseKernelName } from "../../../../src/mla/sparse/chooseSparseKernel.js";
import { Tensor } from "../../../../src/runtime/Tensor.js";
import { validateDenseArgs } from "../../../../src/mla/dense/validateDense.js";
import { type FlashMlaWithKvcacheArgs } from "../../../../src/mla/args.js";
import { SPARSE_HEAD_COUNTS } from "../../../../src/mla/contract/shape.js";
import { makeSparseCase } from "../../../../src/testing/sparseCase.js";

// Host tensors stand in for GPU ones: validateSparseArgs(args, false) runs every check but residency.
const B = 2, S_Q = 2, H_Q = 16, TOPK = 100, PAGE = 53, NUM_BLOCKS = 3;
type Over = Partial<Record<keyof FlashMlaWithKvcacheArgs, unknown>>;

function kCacheOf(num_blocks: number, page: number, dtype: "u8" | "fp8_e4m3" = "u8"): Tensor {
  return Tensor.zerosHost([num_blocks, page, 1, 656], dtype);
}

function args(over: Over = {}): FlashMlaWithKvcacheArgs {
  return {
    q: Tensor.zerosHost([B, S_Q, H_Q, 576], "bf16"),
    kCache: kCacheOf(NUM_BLOCKS, PAGE),
    indices: Tensor.zerosHost([B, S_Q, TOPK], "i32"),
    headDimV: 512,
    schedMeta: getMlaMetadata(),
    isFp8Kvcache: true,
    ...over,
  } as FlashMlaWithKvcacheArgs;
}

function rejects(over: Over, argument: string, pattern: RegExp, requireCuda = false): void {
  assert.throws(
    () => validateSparseArgs(args(over), requireCuda),
    (e: unknown) => {
      assert.ok(e instanceof ArgumentError, `expected ArgumentError, got ${String(e)}`);
      assert.equal(e.argument, argument, e.message);
      assert.match(e.message, /^flashMlaWithKvcache\(\): argument '\w+': expected .+, got .+/);
      assert.match(e.message, pattern);
      return true;
    },
  );
}

test("validateSparseArgs() accepts a well-formed sparse call and reports its shape", () => {
  const a = args();
  const { q, kCache, indices, ...s } = validateSparseArgs(a, false);
  assert.deepEqual([q, kCache, indices], [a.q, a.kCache, a.indices], "the checked tensors are the given ones");
  assert.deepEqual(s, {
    b: B, s_q: S_Q, h_q: H_Q, topk: TOPK, num_blocks: NUM_BLOCKS, page_block_size: PAGE,
    block_stride_bytes: PAGE * 656, softmax_scale: 1 / 24, has_topk_length: false, has_attn_sink: false,
    num_head_tiles: 1,
    config: { b: B, s_q: S_Q, h_q: H_Q, h_kv: 1, page_block_size: PAGE, causal: false, is_fp8_kvcache: true, topk: TOPK },
  });
});

test("validateSparseArgs() takes every native head count, any page size and any topk", () => {
  assert.deepEqual(SPARSE_HEAD_COUNTS, [8, 16, 32, 64, 128]);
  for (const h_q of SPARSE_HEAD_COUNTS) {
    const s = validateSparseArgs(args({ q: Tensor.zerosHost([B, S_Q, h_q, 576], "bf16") }), false);
    assert.equal(s.h_q, h_q);
    assert.equal(s.num_head_tiles, h_q === 128 ? 2 : 1);
  }
  for (const page of [1, 2, 53, 61, 64, 69, 256, 576]) {
    assert.equal(validateSparseArgs(args({ kCache: kCacheOf(2, page) }), false).page_block_size, page);
  }
  for (const topk of [1, 63, 65, 2047, 2048]) {
    assert.equal(validateSparseArgs(args({ indices: Tensor.zerosHost([B, S_Q, topk], "i32") }), false).topk, topk);
  }
  assert.equal(validateSparseArgs(args({ kCache: kCacheOf(NUM_BLOCKS, PAGE, "fp8_e4m3") }), false).num_blocks, NUM_BLOCKS);
});

test("validateSparseArgs() accepts the optional tensors, a given scale, and ignores cacheSeqlens", () => {
  const s = validateSparseArgs(args({
    topkLength: Tensor.zerosHost([B], "i32"),
    attnSink: Tensor.zerosHost([H_Q], "f32"),
    out: Tensor.zerosHost([B, S_Q, H_Q, 512], "bf16"),
    lse: Tensor.zerosHost([B, H_Q, S_Q], "f32"),
    softmaxScale: 576 ** -0.55,
    causal: false,
    // Any tensor: FlashMLA's Python API passes cache_seqlens along on the sparse path and never reads it.
    cacheSeqlens: Tensor.zerosHost([7, 3], "f32"),
  }), false);
  assert.equal(s.has_topk_length, true);
  assert.equal(s.has_attn_sink, true);
  assert.equal(s.softmax_scale, 576 ** -0.55);
});

test("validateSparseArgs() accepts padded blocks (FlashMLA's tests allocate page_block_size + 1 rows)", () => {
  const c = makeSparseCase({ seed: 5, b: 2, s_q: 1, h_q: 64, s_k: 100, topk: 64, pageBlockSize: 2, blockPadTokens: 1 });
  const s = validateSparseArgs(args({ q: c.q, kCache: c.kCache, indices: c.indices, softmaxScale: c.softmaxScale }), false);
  assert.equal(s.block_stride_bytes, 3 * 656);
  assert.equal(s.page_block_size, 2);
});

test("validateSparseArgs() and mlaDecodeReference agree on what a valid sparse case is", () => {
  for (const [seed, h_q, topk, page] of [[1, 8, 1, 1], [2, 16, 65, 61], [3, 64, 128, 64], [4, 128, 100, 69]] as const) {
    const c = makeSparseCase({ seed, b: 3, s_q: 2, h_q, s_k: 300, topk, pageBlockSize: page, topkLength: true, sink: true, invalidFraction: 0.2, blockPadTokens: seed % 2 });
    const call = { q: c.q, kCache: c.kCache, indices: c.indices, topkLength: c.topkLength, attnSink: c.attnSink, headDimV: 512, isFp8Kvcache: true as const, softmaxScale: c.softmaxScale };
    const ours = validateSparseArgs({ ...call, schedMeta: getMlaMetadata() }, false);
    const ref = referenceArgs(call);
    assert.deepEqual([ours.b, ours.s_q, ours.h_q, ours.topk, ours.page_block_size, ours.num_blocks], [ref.b, ref.s_q, ref.h_q, ref.topk, ref.page_block_size, ref.num_blocks]);
  }
});

test("validateSparseArgs() names the flags that belong to the dense path", () => {
  rejects({ isFp8Kvcache: undefined }, "isFp8Kvcache", /expected true on the sparse path \(indices given: it reads the V32 FP8 cache\), got undefined/);
  rejects({ isFp8Kvcache: false }, "isFp8Kvcache", /got boolean false/);
  rejects({ causal: true }, "causal", /expected false or undefined on the sparse path \(the indices choose the keys\), got boolean true/);
  rejects({ causal: "no" }, "causal", /got string no/);
  rejects({ blockTable: Tensor.zerosHost([B, 4], "i32") }, "blockTable", /undefined on the sparse path \(indices are physical token ids, block · page_block_size \+ offset\), got Tensor/);
  rejects({ cacheSeqlens: 5 }, "cacheSeqlens", /a Tensor or undefined.*got number 5/);
  assert.throws(() => validateSparseArgs(null as unknown as FlashMlaWithKvcacheArgs, false), /argument 'args': expected an options object, got null/);
});

test("validateSparseArgs() names q's dtype, rank, head dim, sizes, head count and layout errors", () => {
  rejects({ q: Tensor.zerosHost([B, S_Q, H_Q, 576], "fp16") }, "q", /expected dtype bf16, got fp16/);
  rejects({ q: Tensor.zerosHost([B, S_Q, H_Q, 576], "f32") }, "q", /expected dtype bf16, got f32/);
  rejects({ q: Tensor.zerosHost([B, H_Q, 576], "bf16") }, "q", /expected rank 4 \[b, s_q, h_q, d_qk\], got rank 3/);
  rejects({ q: Tensor.zerosHost([B, S_Q, H_Q, 512], "bf16") }, "q", /d_qk = 576.*got 512/);
  rejects({ q: Tensor.zerosHost([0, S_Q, H_Q, 576], "bf16") }, "q", /b >= 1.*got b = 0/);
  rejects({ q: Tensor.zerosHost([B, 0, H_Q, 576], "bf16") }, "q", /s_q >= 1, got s_q = 0/);
  for (const h_q of [0, 1, 12, 48, 96, 256]) {
    rejects({ q: Tensor.zerosHost([B, S_Q, h_q, 576], "bf16") }, "q", new RegExp(`h_q in \\{8, 16, 32, 64, 128\\}.*got h_q = ${h_q}$`));
  }
  const strided = Tensor.zerosHost([B, S_Q, H_Q, 1152], "bf16").view([B, S_Q, H_Q, 576], [S_Q * H_Q * 1152, H_Q * 1152, 1152, 2]);
  rejects({ q: strided }, "q", /stride 1 in the last dimension/);
  const odd = Tensor.zerosHost([B * S_Q * H_Q * 577], "bf16").view([B, S_Q, H_Q, 576], [S_Q * H_Q * 577, H_Q * 577, 577, 1]);
  rejects({ q: odd }, "q", /multiples of 16 bytes/);
  rejects({ q: undefined }, "q", /expected a Tensor, got undefined/);
});

test("validateSparseArgs() names kCache's dtype, token size, head count, sizes and strides", () => {
  rejects({ kCache: Tensor.zerosHost([NUM_BLOCKS, PAGE, 1, 576], "bf16") }, "kCache", /expected dtype u8 or fp8_e4m3, got bf16/);
  rejects({ kCache: Tensor.zerosHost([NUM_BLOCKS, PAGE, 1, 584], "u8") }, "kCache", /token_bytes = 656.*got 584/);
  rejects({ kCache: Tensor.zerosHost([NUM_BLOCKS, PAGE, 2, 656], "u8") }, "kCache", /h_kv = 1.*got 2/);
  rejects({ kCache: Tensor.zerosHost([NUM_BLOCKS, 656], "u8") }, "kCache", /rank 4/);
  rejects({ kCache: Tensor.zerosHost([0, PAGE, 1, 656], "u8") }, "kCache", /num_blocks >= 1, got 0/);
  rejects({ kCache: Tensor.zerosHost([NUM_BLOCKS, 0, 1, 656], "u8") }, "kCache", /page_block_size >= 1, got 0/);
  // Tokens 672 bytes apart: the kernel reads 656 consecutive bytes per token.
  const gapped = Tensor.zerosHost([NUM_BLOCKS * PAGE * 672], "u8").view([NUM_BLOCKS, PAGE, 1, 656], [PAGE * 672, 672, 672, 1]);
  rejects({ kCache: gapped }, "kCache", /token stride 656 bytes.*got 672/);
  // Blocks 8 bytes apart from a 16-byte boundary: the 128-bit loads would fault.
  const stride = PAGE * 656 + 8;
  const misaligned = Tensor.zerosHost([NUM_BLOCKS * stride], "u8").view([NUM_BLOCKS, PAGE, 1, 656], [stride, 656, 656, 1]);
  rejects({ kCache: misaligned }, "kCache", new RegExp(`block stride that is a positive multiple of 16 bytes.*got ${stride}`));
  const bytesStrided = Tensor.zerosHost([NUM_BLOCKS * PAGE * 656 * 2], "u8").view([NUM_BLOCKS, PAGE, 1, 656], [PAGE * 1312, 1312, 1312, 2]);
  rejects({ kCache: bytesStrided }, "kCache", /stride 1 in the last dimension/);
});

test("validateSparseArgs() names indices, topkLength and attnSink errors", () => {
  rejects({ indices: undefined }, "indices", /an int32 tensor \[b, s_q, topk\].*got undefined/);
  rejects({ indices: Tensor.zerosHost([B, S_Q, TOPK], "f32") }, "indices", /dtype i32, got f32/);
  rejects({ indices: Tensor.zerosHost([B, TOPK], "i32") }, "indices", /rank 3 \[b, s_q, topk\]/);
  rejects({ indices: Tensor.zerosHost([B + 1, S_Q, TOPK], "i32") }, "indices", /b = 2.*got 3/);
  rejects({ indices: Tensor.zerosHost([B, S_Q + 1, TOPK], "i32") }, "indices", /s_q = 2.*got 3/);
  rejects({ indices: Tensor.zerosHost([B, S_Q, 0], "i32") }, "indices", /topk >= 1.*got topk = 0/);
  const strided = Tensor.zerosHost([B, S_Q, 2 * TOPK], "i32").view([B, S_Q, TOPK], [S_Q * 2 * TOPK, 2 * TOPK, 2]);
  rejects({ indices: strided }, "indices", /stride 1 in the last dimension/);

  rejects({ topkLength: Tensor.zerosHost([B], "f32") }, "topkLength", /dtype i32, got f32/);
  rejects({ topkLength: Tensor.zerosHost([B + 1], "i32") }, "topkLength", /b = 2.*got 3/);
  rejects({ topkLength: Tensor.zerosHost([B, S_Q], "i32") }, "topkLength", /rank 1 \[b\], got rank 2/);
  rejects({ topkLength: Tensor.zerosHost([2 * B], "i32").view([B], [2]) }, "topkLength", /contiguous/);
  rejects({ topkLength: [3, 4] }, "topkLength", /expected a Tensor, got Array/);

  rejects({ attnSink: Tensor.zerosHost([H_Q], "bf16") }, "attnSink", /dtype f32, got bf16/);
  rejects({ attnSink: Tensor.zerosHost([H_Q + 1], "f32") }, "attnSink", /h_q = 16.*got 17/);
  rejects({ attnSink: Tensor.zerosHost([2 * H_Q], "f32").view([H_Q], [2]) }, "attnSink", /contiguous/);
});

test("validateSparseArgs() names headDimV, softmaxScale, schedMeta, out and lse errors", () => {
  rejects({ headDimV: 576 }, "headDimV", /expected 512, got number 576/);
  rejects({ headDimV: undefined }, "headDimV", /got undefined/);
  for (const bad of [0, -1, Infinity, NaN]) rejects({ softmaxScale: bad }, "softmaxScale", /a finite number > 0/);
  rejects({ schedMeta: {} }, "schedMeta", /getMlaMetadata\(\) returns, got Object/);
  rejects({ schedMeta: undefined }, "schedMeta", /got undefined/);
  rejects({ out: Tensor.zerosHost([B, S_Q, H_Q, 512], "fp16") }, "out", /dtype bf16, got fp16/);
  rejects({ out: Tensor.zerosHost([B, S_Q, H_Q, 576], "bf16") }, "out", /d_v = 512.*got 576/);
  // FlashMLA's C++ allocates lse as [b, s_q, h_q] and returns a transposed view; ours is [b, h_q, s_q] itself.
  rejects({ lse: Tensor.zerosHost([B, S_Q, H_Q], "f32") }, "lse", /h_q = 16.*got 2/);
  rejects({ lse: Tensor.zerosHost([B, H_Q, S_Q], "bf16") }, "lse", /dtype f32/);
});

test("validateSparseArgs() refuses metadata filled for another sparse batch, naming the field", () => {
  const meta = MlaSchedMeta.withConfig({ b: B, s_q: S_Q, h_q: H_Q, h_kv: 1, page_block_size: PAGE, causal: false, is_fp8_kvcache: true, topk: TOPK });
  assert.doesNotThrow(() => validateSparseArgs(args({ schedMeta: meta }), false));
  rejects({ schedMeta: meta, indices: Tensor.zerosHost([B, S_Q, 64], "i32") }, "schedMeta", /metadata for topk = 100 .*got topk = 64/);
  rejects({ schedMeta: meta, kCache: kCacheOf(NUM_BLOCKS, 64) }, "schedMeta", /page_block_size = 53 .*got page_block_size = 64/);
  const dense = MlaSchedMeta.withConfig({ b: B, s_q: S_Q, h_q: H_Q, h_kv: 1, page_block_size: 64, causal: false, is_fp8_kvcache: false, topk: null });
  rejects({ schedMeta: dense, kCache: kCacheOf(NUM_BLOCKS, 64) }, "schedMeta", /is_fp8_kvcache = false .*got is_fp8_kvcache = true/);
});

test("validateSparseArgs() requires CUDA tensors on the GPU path", () => {
  rejects({}, "q", /a CUDA tensor, got a cpu tensor/, true);
});

test("flashMlaWithKvcache() routes a call with indices to the sparse path and reports its argument errors there", () => {
  assert.equal(isSparseCall(args()), true);
  assert.equal(isSparseCall(args({ indices: undefined })), false);
  // Argument errors come first, in validateSparseArgs' order (this machine needs no GPU for them).
  assert.throws(() => flashMlaWithKvcache(args({ isFp8Kvcache: undefined })), /argument 'isFp8Kvcache': expected true on the sparse path/);
  assert.throws(() => flashMlaWithKvcache(args({ q: Tensor.zerosHost([B, S_Q, H_Q, 576], "fp16") })), /argument 'q': expected dtype bf16, got fp16/);
  // Host tensors pass every check but residency: the sparse path asks for CUDA tensors, as the dense one does.
  assert.throws(() => flashMlaWithKvcache(args()), /argument 'q': expected a CUDA tensor, got a cpu tensor/);
  // The dense validator still turns sparse arguments away on its own.
  assert.throws(() => validateDenseArgs(args(), false), /argument 'indices': expected the dense path here/);
});

test("decodeWithOverrides() refuses a sparse plan that does not exist and dense overrides on a sparse call, before it looks at the tensors", () => {
  for (const [overrides, argument, pattern] of [
    [{ sparsePlan: "h16" }, "overrides.sparsePlan", /"m64", "h128x", "h16x" or undefined, got "h16"/],
    [{ denseForm: "pipe" }, "overrides.denseForm", /undefined on the sparse path/],
    [{ mergeSplitPairs: false }, "overrides.mergeSplitPairs", /undefined on the sparse path/],
  ] as const) {
    const a = args();
    assert.throws(() => decodeWithOverrides(a, overrides as DecodeOverrides), (e: unknown) => e instanceof ArgumentError && e.argument === argument && pattern.test(e.message), JSON.stringify(overrides));
    assert.equal(a.schedMeta.initialized, false);
  }
  // A valid plan reaches the argument checks (host tensors: the residency check).
  assert.throws(() => decodeWithOverrides(args(), { sparsePlan: "m64" }), /argument 'q': expected a CUDA tensor/);
});

test("chooseSparseKernel(): h128x at 128 heads, h16x at 8 and 16, m64 between", () => {
  assert.deepEqual(SPARSE_HEAD_COUNTS.map((h) => chooseSparseKernel(h)), ["h16x", "h16x", "m64", "m64", "h128x"]);
  assert.deepEqual(SPARSE_HEAD_COUNTS.map((h) => sparseKernelName(chooseSparseKernel(h))), ["sparse_h16x_bf16", "sparse_h16x_bf16", "sparse_m64_bf16", "sparse_m64_bf16", "sparse_h128x_bf16"]);
});

test("chooseSparseKernel(): MODEL1 runs m64 below 128 heads (no h16x kernel reads it) and h128x at 128", () => {
  assert.deepEqual(SPARSE_HEAD_COUNTS.map((h) => sparseKernelName(chooseSparseKernel(h, "MODEL1"), "MODEL1")), ["sparse_m64_model1", "sparse_m64_model1", "sparse_m64_model1", "sparse_m64_model1", "sparse_h128x_model1"]);
  assert.throws(() => checkPlanFitsHeads("f", "h16x", 16, "MODEL1"), (e: unknown) => e instanceof ArgumentError && e.argument === "overrides.sparsePlan" && /MODEL1/.test(e.message));
});

test("a forced plan is refused where the head count does not fit it, naming the count", () => {
  const refused = (re: RegExp) => (e: unknown) => e instanceof ArgumentError && e.argument === "overrides.sparsePlan" && re.test(e.message);
  assert.throws(() => checkPlanFitsHeads("f", "h128x", 64), refused(/"h128x" only at h_q = 128.*got h_q = 64/));
  assert.throws(() => checkPlanFitsHeads("f", "h16x", 32), refused(/"h16x" only at h_q <= 16.*got h_q = 32/));
  for (const h_q of SPARSE_HEAD_COUNTS) assert.doesNotThrow(() => checkPlanFitsHeads("f", "m64", h_q), `m64 runs h_q = ${h_q}`);
  assert.doesNotThrow(() => checkPlanFitsHeads("f", "h128x", 128));
  for (const h_q of [8, 16]) assert.doesNotThrow(() => checkPlanFitsHeads("f", "h16x", h_q));
});

test("DeepSeek-V4's arguments are refused by name, not ignored, until its GPU decode exists", () => {
  const extra = Tensor.zerosHost([1, 64, 1, 584], "u8");
  rejects({ extraKCache: extra } as Over, "extraKCache", /expected undefined \(DeepSeek-V4's second cache.*mlaDecodeReference/);
  rejects({ extraIndices: Tensor.zerosHost([B, S_Q, 8], "i32") } as Over, "extraIndices", /not yet in the GPU decode/);
  rejects({ extraTopkLength: Tensor.zerosHost([B], "i32") } as Over, "extraTopkLength", /not yet in the GPU decode/);
  rejects({ q: Tensor.zerosHost([B, S_Q, H_Q, 512], "bf16") }, "q", /d_qk = 576, DeepSeek-V3's head.*got 512/);
  assert.throws(() => validateDenseArgs({ ...args(), indices: undefined, isFp8Kvcache: undefined, extraKCache: extra } as FlashMlaWithKvcacheArgs, false), /argument 'extraKCache'/);
});
