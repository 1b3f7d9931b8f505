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
import { KERNEL_REGISTRY } from "../../../../src/mla/contract/kernelRegistry.js";
import { makeSparseCase } from "../../../../src/testing/sparseCase.js";
import { makeModel1Case } from "../../../../src/testing/model1Case.js";
import { model1PageBytes } from "../../../../src/numeric/kvCacheModel1.js";

// Host tensors stand in for GPU ones: validateSparseArgs(args, false) runs every check but residency.
const B = 2, S_Q = 2, H_Q = 16, TOPK = 100, PAGE = 53, NUM_BLOCKS = 3;
type Over = Partial<Record<keyof FlashMlaWithKvcacheArgs, unknown>>;

function kCacheOf(num_blocks: number, page: number, dtype: "u8" | "fp8_e4m3" = "u8"): Tensor {
  return Tensor.zerosHost([num_blocks, page, 1, 656], dtype);
}

/**
 * A MODEL1 cache of `num_blocks` pages `stride` bytes apart (FlashMLA's padded page by default). Its
 * storage holds whole pages even where the stride is too small: only the checks may refuse it.
 */
function model1KCache(num_blocks: number, page: number, stride = model1PageBytes(page)): Tensor {
  return Tensor.zerosHost([num_blocks * Math.max(stride, page * 584)], "u8").view([num_blocks, page, 1, 584], [stride, 584, 584, 1]);
}

/** The default call with DeepSeek-V4's head and cache. */
function model1(over: Over = {}): Over {
  return { q: Tensor.zerosHost([B, S_Q, H_Q, 512], "bf16"), kCache: model1KCache(NUM_BLOCKS, PAGE), ...over };
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
  const { q, kCache, indices, extraKCache, extraIndices, ...s } = validateSparseArgs(a, false);
  assert.deepEqual([q, kCache, indices], [a.q, a.kCache, a.indices], "the checked tensors are the given ones");
  assert.deepEqual([extraKCache, extraIndices], [undefined, undefined]);
  assert.deepEqual(s, {
    b: B, s_q: S_Q, h_q: H_Q, format: "V32", d_qk: 576, topk: TOPK, num_blocks: NUM_BLOCKS, page_block_size: PAGE,
    block_stride_bytes: PAGE * 656, softmax_scale: 1 / 24, has_topk_length: false, has_attn_sink: false,
    extra: undefined, has_extra_topk_length: false, num_head_tiles: 1,
    config: { b: B, s_q: S_Q, h_q: H_Q, h_kv: 1, page_block_size: PAGE, causal: false, is_fp8_kvcache: true, topk: TOPK, d_qk: 576, extra_topk: 0 },
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
  rejects({ isFp8Kvcache: undefined }, "isFp8Kvcache", /expected true on the sparse path \(indices given: it reads an FP8 cache\), got undefined/);
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
  // 512 is DeepSeek-V4's head (the MODEL1 cache); any other d_qk names both heads the path reads.
  for (const d_qk of [0, 448, 584, 656, 1024]) {
    rejects({ q: Tensor.zerosHost([B, S_Q, H_Q, d_qk], "bf16") }, "q", new RegExp(`d_qk = 576 \\(DeepSeek-V3\\.2: the V32 cache\\) or 512 \\(DeepSeek-V4: the MODEL1 cache\\) on the sparse path, got ${d_qk} \\(shape`));
  }
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
  rejects({ kCache: Tensor.zerosHost([NUM_BLOCKS, PAGE, 1, 584], "u8") }, "kCache", /last dim 656 \(the V32 format, which q's d_qk = 576 selects\), got 584 \(shape \[3, 53, 1, 584\]\)/);
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
  rejects({ kCache: misaligned }, "kCache", new RegExp(`a block stride >= page_block_size · 656 = ${PAGE * 656} bytes and a multiple of 16 .*got ${stride} `));
  // Blocks closer than a page's 656-byte tokens would overlap: a 16-byte multiple is not enough.
  const short = (PAGE - 1) * 656;
  const overlapping = Tensor.zerosHost([NUM_BLOCKS * PAGE * 656], "u8").view([NUM_BLOCKS, PAGE, 1, 656], [short, 656, 656, 1]);
  rejects({ kCache: overlapping }, "kCache", new RegExp(`block stride >= page_block_size · 656 = ${PAGE * 656} bytes.*got ${short} `));
  const bytesStrided = Tensor.zerosHost([NUM_BLOCKS * PAGE * 656 * 2], "u8").view([NUM_BLOCKS, PAGE, 1, 656], [PAGE * 1312, 1312, 1312, 2]);
  rejects({ kCache: bytesStrided }, "kCache", /stride 1 in the last dimension/);
});

test("validateSparseArgs() names indices, topkLength and attnSink errors", () => {
  rejects({ indices: undefined }, "indices", /an int32 tensor \[b, s_q, topk\].*got undefined/);
  rejects({ indices: Tensor.zerosHost([B, S_Q, TOPK], "f32") }, "indices", /dtype i32, got f32/);
  rejects({ indices: Tensor.zerosHost([B, TOPK], "i32") }, "indices", /rank 3 \[b, s_q, topk\]/);
  rejects({ indices: Tensor.zerosHost([B + 1, S_Q, TOPK], "i32") }, "indices", /b = 2.*got 3/);
  rejects({ indices: Tensor.zerosHost([B, S_Q + 1, TOPK], "i32") }, "indices", /s_q = 2.*got 3/);
  rejects({ indices: Tensor.zerosHost([B, S_Q, 0], "i32") }, "indices", /topk in \[1, 2\^29\] \(shape \[b, s_q, topk\]\), got topk = 0/);
  // Validation reads no tensor data, so a view past its small host storage stands in for 2^29 + 1 entries.
  // A page whose offsets leave int32 (views past a small storage: the checks never read it).
  const bigPage = Tensor.zerosHost([656], "u8").view([1, 3_300_000, 1, 656], [0, 656, 656, 1]);
  rejects({ kCache: bigPage }, "kCache", /page_block_size · 656 < 2\^31 bytes.*got page_block_size = 3300000/);
  const huge = Tensor.zerosHost([1], "i32").view([B, S_Q, 2 ** 29 + 1], [0, 0, 1]);
  rejects({ indices: huge }, "indices", /topk in \[1, 2\^29\].*got topk = 536870913/);
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
  const meta = MlaSchedMeta.withConfig({ b: B, s_q: S_Q, h_q: H_Q, h_kv: 1, page_block_size: PAGE, causal: false, is_fp8_kvcache: true, topk: TOPK, d_qk: 576, extra_topk: 0 });
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

test("chooseSparseKernel(): MODEL1 takes the same plans, its own kernels", () => {
  assert.deepEqual(SPARSE_HEAD_COUNTS.map((h) => sparseKernelName(chooseSparseKernel(h), "MODEL1")), ["sparse_h16x_model1", "sparse_h16x_model1", "sparse_m64_model1", "sparse_m64_model1", "sparse_h128x_model1"]);
  // With a second cache, the kernels compiled with the second list's bookkeeping.
  assert.deepEqual(SPARSE_HEAD_COUNTS.map((h) => sparseKernelName(chooseSparseKernel(h), "MODEL1", true)), ["sparse_h16x_model1_extra", "sparse_h16x_model1_extra", "sparse_m64_model1_extra", "sparse_m64_model1_extra", "sparse_h128x_model1_extra"]);
  assert.deepEqual(SPARSE_HEAD_COUNTS.map((h) => sparseKernelName(chooseSparseKernel(h), "V32", true)), ["sparse_h16x_bf16_extra", "sparse_h16x_bf16_extra", "sparse_m64_bf16_extra", "sparse_m64_bf16_extra", "sparse_h128x_bf16_extra"]);
  // Every registry name the plans and formats make exists.
  for (const plan of ["m64", "h128x", "h16x"] as const)
    for (const format of ["V32", "MODEL1"] as const) for (const extra of [false, true]) assert.ok(sparseKernelName(plan, format, extra) in KERNEL_REGISTRY, `${plan} ${format} ${extra}`);
});

test("a forced plan is refused where the head count does not fit it, naming the count", () => {
  const refused = (re: RegExp) => (e: unknown) => e instanceof ArgumentError && e.argument === "overrides.sparsePlan" && re.test(e.message);
  assert.throws(() => checkPlanFitsHeads("f", "h128x", 64), refused(/"h128x" only at h_q = 128.*got h_q = 64/));
  assert.throws(() => checkPlanFitsHeads("f", "h16x", 32), refused(/"h16x" only at h_q <= 16.*got h_q = 32/));
  for (const h_q of SPARSE_HEAD_COUNTS) assert.doesNotThrow(() => checkPlanFitsHeads("f", "m64", h_q), `m64 runs h_q = ${h_q}`);
  assert.doesNotThrow(() => checkPlanFitsHeads("f", "h128x", 128));
  for (const h_q of [8, 16]) assert.doesNotThrow(() => checkPlanFitsHeads("f", "h16x", h_q));
});

// DeepSeek-V4: q's d_qk 512 selects the MODEL1 cache, and either format may bring a second cache.
const EXTRA_TOPK = 40, EXTRA_PAGE = 61, EXTRA_BLOCKS = 2;

/** The second cache's arguments in `format`, with a page size and topk of their own. */
function extraOf(format: "V32" | "MODEL1", over: Over = {}): Over {
  const extraKCache = format === "V32" ? kCacheOf(EXTRA_BLOCKS, EXTRA_PAGE) : model1KCache(EXTRA_BLOCKS, EXTRA_PAGE);
  return { extraKCache, extraIndices: Tensor.zerosHost([B, S_Q, EXTRA_TOPK], "i32"), ...over };
}

test("validateSparseArgs() reads q's d_qk 512 as DeepSeek-V4's MODEL1 cache and reports its shape", () => {
  const a = args(model1());
  const { q, kCache, indices, extraKCache, extraIndices, ...s } = validateSparseArgs(a, false);
  assert.deepEqual([q, kCache, indices, extraKCache, extraIndices], [a.q, a.kCache, a.indices, undefined, undefined]);
  // FlashMLA pads a 53-token page of 30,952 bytes to the next multiple of 576.
  assert.equal(model1PageBytes(PAGE), 54 * 576);
  assert.deepEqual(s, {
    b: B, s_q: S_Q, h_q: H_Q, format: "MODEL1", d_qk: 512, topk: TOPK, num_blocks: NUM_BLOCKS, page_block_size: PAGE,
    block_stride_bytes: model1PageBytes(PAGE), softmax_scale: 1 / Math.sqrt(512), has_topk_length: false, has_attn_sink: false,
    extra: undefined, has_extra_topk_length: false, num_head_tiles: 1,
    config: { b: B, s_q: S_Q, h_q: H_Q, h_kv: 1, page_block_size: PAGE, causal: false, is_fp8_kvcache: true, topk: TOPK, d_qk: 512, extra_topk: 0 },
  });
  for (const h_q of SPARSE_HEAD_COUNTS) {
    assert.equal(validateSparseArgs(args(model1({ q: Tensor.zerosHost([B, S_Q, h_q, 512], "bf16") })), false).num_head_tiles, h_q === 128 ? 2 : 1);
  }
  assert.equal(validateSparseArgs(args(model1({ softmaxScale: 512 ** -0.55 })), false).softmax_scale, 512 ** -0.55);
  const fp8 = model1KCache(NUM_BLOCKS, PAGE);
  assert.equal(validateSparseArgs(args(model1({ kCache: fp8.view(fp8.shape, fp8.strides, "fp8_e4m3") })), false).format, "MODEL1");
});

test("validateSparseArgs() takes any MODEL1 page stride from page_block_size · 584 up in 16-byte steps, and FlashMLA's for a lone page", () => {
  for (const page of [1, 2, 53, 64, 256]) {
    // One page has no stride to read: the kernels are told FlashMLA's, whatever the view says.
    const lone = Tensor.zerosHost([1, page, 1, 584], "u8");
    assert.equal(validateSparseArgs(args(model1({ kCache: lone })), false).block_stride_bytes, model1PageBytes(page), `one page of ${page}`);
    const tight = Math.ceil((page * 584) / 16) * 16;
    for (const stride of [tight, model1PageBytes(page), model1PageBytes(page) + 16]) {
      const s = validateSparseArgs(args(model1({ kCache: model1KCache(NUM_BLOCKS, page, stride) })), false);
      assert.deepEqual([s.page_block_size, s.block_stride_bytes], [page, stride], `pages of ${page} tokens ${stride} bytes apart`);
    }
  }
});

test("validateSparseArgs() names a MODEL1 cache's token size, token stride, block stride and token count as kCache's errors", () => {
  const least = PAGE * 584;
  rejects(model1({ kCache: kCacheOf(NUM_BLOCKS, PAGE) }), "kCache", /expected last dim 584 \(the MODEL1 format, which q's d_qk = 512 selects\), got 656 \(shape \[3, 53, 1, 656\]\)/);
  rejects(model1({ kCache: undefined }), "kCache", /expected a \[num_blocks, page_block_size, 1, 584\] u8 tensor \(the MODEL1 format, which q's d_qk = 512 selects\), got undefined/);
  rejects(model1({ kCache: Tensor.zerosHost([NUM_BLOCKS, PAGE, 1, 584], "bf16") }), "kCache", /dtype u8 or fp8_e4m3, got bf16/);
  rejects(model1({ kCache: Tensor.zerosHost([NUM_BLOCKS, PAGE, 2, 584], "u8") }), "kCache", /h_kv = 1.*got 2/);
  // FlashMLA's view puts tokens 584 bytes apart; the kernels find each token's data and scales from that.
  const gapped = Tensor.zerosHost([NUM_BLOCKS * PAGE * 592], "u8").view([NUM_BLOCKS, PAGE, 1, 584], [PAGE * 592, 592, 592, 1]);
  rejects(model1({ kCache: gapped }), "kCache", /token stride 584 bytes.*got 592 \(strides \[31376, 592, 592, 1\]\)/);
  // 30,952 holds the page but breaks the 16-byte loads; 30,944 is aligned but lays the next page over the last scale record.
  for (const stride of [least, least - 8]) {
    rejects(model1({ kCache: model1KCache(NUM_BLOCKS, PAGE, stride) }), "kCache", new RegExp(`a block stride >= page_block_size · 584 = ${least} bytes and a multiple of 16 .*got ${stride} \\(strides`));
  }
  // Token ids are int32. Validation reads no data, so a view past its small storage stands in for 2^31 tokens.
  const huge = Tensor.zerosHost([1], "u8").view([2 ** 22, 512, 1, 584], [model1PageBytes(512), 584, 584, 1]);
  rejects(model1({ kCache: huge }), "kCache", /at most 2\^31 - 1 tokens \(int32 token ids\), got 4194304 · 512/);
  const most = Tensor.zerosHost([1], "u8").view([2 ** 21 - 1, 1024, 1, 584], [model1PageBytes(1024), 584, 584, 1]);
  assert.equal(validateSparseArgs(args(model1({ kCache: most })), false).num_blocks, 2 ** 21 - 1, "2^31 - 1024 tokens fit");
  // Offsets within a page are int32: a page of more than 2^31 bytes is refused even with few tokens in all.
  const bigPage = Tensor.zerosHost([1], "u8").view([1, 2 ** 22, 1, 584], [0, 584, 584, 1]);
  rejects(model1({ kCache: bigPage }), "kCache", /page_block_size · 584 < 2\^31 bytes.*got page_block_size = 4194304/);
});

test("validateSparseArgs() refuses a cache of the other format, naming kCache and the d_qk that chose", () => {
  rejects({ kCache: model1KCache(NUM_BLOCKS, PAGE) }, "kCache", /expected last dim 656 \(the V32 format, which q's d_qk = 576 selects\), got 584/);
  rejects(model1({ kCache: kCacheOf(NUM_BLOCKS, PAGE) }), "kCache", /expected last dim 584 \(the MODEL1 format, which q's d_qk = 512 selects\), got 656/);
});

test("validateSparseArgs() takes a second cache in either format, with its own page size, topk and lengths", () => {
  for (const format of ["V32", "MODEL1"] as const) {
    const a = args({ ...(format === "MODEL1" ? model1() : {}), ...extraOf(format), extraTopkLength: Tensor.zerosHost([B], "i32") });
    const s = validateSparseArgs(a, false);
    assert.equal(s.format, format);
    assert.equal(s.extraKCache, a.extraKCache, "the checked tensors are the given ones");
    assert.equal(s.extraIndices, a.extraIndices);
    const stride = format === "V32" ? EXTRA_PAGE * 656 : model1PageBytes(EXTRA_PAGE);
    assert.deepEqual(s.extra, { topk: EXTRA_TOPK, num_blocks: EXTRA_BLOCKS, page_block_size: EXTRA_PAGE, block_stride_bytes: stride }, format);
    assert.equal(s.has_extra_topk_length, true);
    assert.deepEqual([s.topk, s.page_block_size, s.config.page_block_size, s.config.extra_topk], [TOPK, PAGE, PAGE, EXTRA_TOPK], "the main cache keeps its own");
    assert.equal(validateSparseArgs(args({ ...(format === "MODEL1" ? model1() : {}), ...extraOf(format) }), false).has_extra_topk_length, false);
  }
});

test("validateSparseArgs() and mlaDecodeReference agree on what a valid MODEL1 case is, with and without a second cache", () => {
  for (const [seed, h_q, withExtra] of [[1, 8, false], [2, 64, true], [3, 128, true]] as const) {
    const c = makeModel1Case({
      seed, b: 2, s_q: 2, h_q, topk: 70, s_k: 200, pageBlockSize: 64, topkLength: true, sink: true, invalidFraction: 0.1,
      ...(withExtra ? { extra: { topk: 33, s_k: 90, pageBlockSize: 2, topkLengthRandom: true } } : {}),
    });
    const ours = validateSparseArgs({ ...c, schedMeta: getMlaMetadata() }, false);
    const ref = referenceArgs(c);
    assert.equal(ours.format, ref.format);
    assert.equal(ours.d_qk, ref.d_qk);
    const scope = ({ topk, num_blocks, page_block_size, stride_kv_block }: { topk: number; num_blocks: number; page_block_size: number; stride_kv_block: number }) =>
      ({ topk, num_blocks, page_block_size, block_stride_bytes: stride_kv_block });
    assert.deepEqual([ours.b, ours.s_q, ours.h_q], [ref.b, ref.s_q, ref.h_q]);
    assert.deepEqual({ topk: ours.topk, num_blocks: ours.num_blocks, page_block_size: ours.page_block_size, block_stride_bytes: ours.block_stride_bytes }, scope(ref.scopes[0]));
    assert.deepEqual(ours.extra, ref.scopes[1] === undefined ? undefined : scope(ref.scopes[1]), `seed ${seed}`);
    assert.equal(ours.has_extra_topk_length, withExtra);
  }
});

test("validateSparseArgs() names the second cache's arguments: each of extraKCache and extraIndices needs the other", () => {
  const { extraKCache, extraIndices } = extraOf("V32");
  rejects({ extraKCache }, "extraIndices", /expected a Tensor when extraKCache is given, got undefined/);
  rejects({ extraIndices }, "extraKCache", /expected a Tensor when extraIndices is given, got undefined/);
  // A list of valid lengths alone would otherwise be dropped without a word.
  rejects({ extraTopkLength: Tensor.zerosHost([B], "i32") }, "extraTopkLength", /expected undefined without extraKCache, got Tensor/);
  rejects(model1({ extraTopkLength: Tensor.zerosHost([B], "i32") }), "extraTopkLength", /undefined without extraKCache/);
});

test("validateSparseArgs() holds extraKCache to kCache's format and checks, naming extraKCache", () => {
  rejects(extraOf("V32", { extraKCache: model1KCache(EXTRA_BLOCKS, EXTRA_PAGE) }), "extraKCache", /expected last dim 656 \(the V32 format, which q's d_qk = 576 selects\), got 584/);
  rejects(model1(extraOf("MODEL1", { extraKCache: kCacheOf(EXTRA_BLOCKS, EXTRA_PAGE) })), "extraKCache", /expected last dim 584 \(the MODEL1 format, which q's d_qk = 512 selects\), got 656/);
  rejects(extraOf("V32", { extraKCache: Tensor.zerosHost([EXTRA_BLOCKS, EXTRA_PAGE, 1, 656], "bf16") }), "extraKCache", /dtype u8 or fp8_e4m3, got bf16/);
  rejects(extraOf("V32", { extraKCache: Tensor.zerosHost([EXTRA_BLOCKS, 656], "u8") }), "extraKCache", /rank 4/);
  rejects(extraOf("V32", { extraKCache: Tensor.zerosHost([0, EXTRA_PAGE, 1, 656], "u8") }), "extraKCache", /num_blocks >= 1, got 0/);
  rejects(extraOf("V32", { extraKCache: Tensor.zerosHost([EXTRA_BLOCKS, 0, 1, 656], "u8") }), "extraKCache", /page_block_size >= 1, got 0/);
  const gapped = Tensor.zerosHost([EXTRA_BLOCKS * EXTRA_PAGE * 592], "u8").view([EXTRA_BLOCKS, EXTRA_PAGE, 1, 584], [EXTRA_PAGE * 592, 592, 592, 1]);
  rejects(model1(extraOf("MODEL1", { extraKCache: gapped })), "extraKCache", /token stride 584 bytes.*got 592/);
  const least = EXTRA_PAGE * 584;
  rejects(model1(extraOf("MODEL1", { extraKCache: model1KCache(EXTRA_BLOCKS, EXTRA_PAGE, least) })), "extraKCache", new RegExp(`block stride >= page_block_size · 584 = ${least} bytes and a multiple of 16 .*got ${least} `));
  // Each cache fits an int32 id on its own; the kernels number the second's tokens after the first's.
  const half = (tokenBytes: number) => Tensor.zerosHost([1], "u8").view([2 ** 21, 512, 1, tokenBytes], [512 * tokenBytes, tokenBytes, tokenBytes, 1]);
  rejects({ kCache: half(656), ...extraOf("V32", { extraKCache: half(656) }) }, "extraKCache", /at most 2\^31 - 1 tokens in kCache and extraKCache together .*got 2147483648/);
});

test("validateSparseArgs() names extraIndices and extraTopkLength errors", () => {
  rejects(extraOf("V32", { extraIndices: Tensor.zerosHost([B, S_Q, EXTRA_TOPK], "f32") }), "extraIndices", /dtype i32, got f32/);
  rejects(extraOf("V32", { extraIndices: Tensor.zerosHost([B, EXTRA_TOPK], "i32") }), "extraIndices", /rank 3 \[b, s_q, extra_topk\]/);
  rejects(extraOf("V32", { extraIndices: Tensor.zerosHost([B + 1, S_Q, EXTRA_TOPK], "i32") }), "extraIndices", /b = 2.*got 3/);
  rejects(model1(extraOf("MODEL1", { extraIndices: Tensor.zerosHost([B, S_Q + 1, EXTRA_TOPK], "i32") })), "extraIndices", /s_q = 2.*got 3/);
  rejects(extraOf("V32", { extraIndices: Tensor.zerosHost([B, S_Q, 0], "i32") }), "extraIndices", /expected extra_topk in \[1, 2\^29\] \(shape \[b, s_q, extra_topk\]\), got extra_topk = 0/);
  const strided = Tensor.zerosHost([B, S_Q, 2 * EXTRA_TOPK], "i32").view([B, S_Q, EXTRA_TOPK], [S_Q * 2 * EXTRA_TOPK, 2 * EXTRA_TOPK, 2]);
  rejects(extraOf("V32", { extraIndices: strided }), "extraIndices", /stride 1 in the last dimension/);

  rejects(extraOf("V32", { extraTopkLength: Tensor.zerosHost([B], "f32") }), "extraTopkLength", /dtype i32, got f32/);
  rejects(extraOf("V32", { extraTopkLength: Tensor.zerosHost([B + 1], "i32") }), "extraTopkLength", /b = 2.*got 3/);
  rejects(model1(extraOf("MODEL1", { extraTopkLength: Tensor.zerosHost([B, S_Q], "i32") })), "extraTopkLength", /rank 1 \[b\], got rank 2/);
  rejects(extraOf("V32", { extraTopkLength: Tensor.zerosHost([2 * B], "i32").view([B], [2]) }), "extraTopkLength", /contiguous/);
  rejects(extraOf("V32", { extraTopkLength: [3, 4] }), "extraTopkLength", /expected a Tensor, got Array/);
});

test("validateSparseArgs() refuses metadata filled for the other format or another second list, naming d_qk or extra_topk", () => {
  const config = { b: B, s_q: S_Q, h_q: H_Q, h_kv: 1, page_block_size: PAGE, causal: false, is_fp8_kvcache: true, topk: TOPK };
  const meta = (d_qk: number, extra_topk: number) => MlaSchedMeta.withConfig({ ...config, d_qk, extra_topk });
  assert.doesNotThrow(() => validateSparseArgs(args(model1({ schedMeta: meta(512, 0) })), false));
  assert.doesNotThrow(() => validateSparseArgs(args(extraOf("V32", { schedMeta: meta(576, EXTRA_TOPK) })), false));
  rejects(model1({ schedMeta: meta(576, 0) }), "schedMeta", /metadata for d_qk = 576 .*got d_qk = 512/);
  rejects({ schedMeta: meta(512, 0) }, "schedMeta", /metadata for d_qk = 512 .*got d_qk = 576/);
  rejects(extraOf("V32", { schedMeta: meta(576, 32) }), "schedMeta", /metadata for extra_topk = 32 .*got extra_topk = 40/);
  rejects(extraOf("V32", { schedMeta: meta(576, 0) }), "schedMeta", /metadata for extra_topk = 0 .*got extra_topk = 40/);
  rejects(model1({ schedMeta: meta(512, EXTRA_TOPK) }), "schedMeta", /metadata for extra_topk = 40 .*got extra_topk = 0/);
});

test("flashMlaWithKvcache() routes a MODEL1 call with indices to the sparse path, and one without to the dense path's refusal", () => {
  assert.throws(() => flashMlaWithKvcache(args(model1(extraOf("MODEL1")))), /argument 'q': expected a CUDA tensor, got a cpu tensor/);
  // Without indices the second cache would meet the dense kernels, which cannot read it.
  const { extraKCache } = extraOf("MODEL1");
  assert.throws(() => flashMlaWithKvcache(args(model1({ indices: undefined, isFp8Kvcache: undefined, extraKCache }))), /argument 'extraKCache': expected undefined on the dense path/);
});
