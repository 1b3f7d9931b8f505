import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../../src/errors/ArgumentError.js";
import type { FlashMlaWithKvcacheArgs } from "../../../../src/mla/args.js";
import { chooseKernel } from "../../../../src/mla/chooseKernel.js";
import { chooseDenseKernel, DENSE_FORMS, denseBlocksPerPart, denseKernelName } from "../../../../src/mla/dense/chooseDenseKernel.js";
import { validateDenseArgs } from "../../../../src/mla/dense/validateDense.js";
import { decodeWithOverrides } from "../../../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata, MlaSchedMeta } from "../../../../src/mla/sched/MlaSchedMeta.js";
import { Tensor } from "../../../../src/runtime/Tensor.js";
import { rejectsWithMessage } from "../../../helpers/argumentError.js";

// Host tensors stand in for GPU ones: validateDenseArgs(args, false) checks everything but residency.
function args(over: Partial<Record<keyof FlashMlaWithKvcacheArgs, unknown>> = {}): FlashMlaWithKvcacheArgs {
  const b = 2, s_q = 2, h_q = 8, h_kv = 2;
  return {
    q: Tensor.zerosHost([b, s_q, h_q, 576], "bf16"),
    kCache: Tensor.zerosHost([4, 64, h_kv, 576], "bf16"),
    blockTable: Tensor.zerosHost([b, 3], "i32"),
    cacheSeqlens: Tensor.zerosHost([b], "i32"),
    headDimV: 512,
    schedMeta: getMlaMetadata(),
    ...over,
  } as FlashMlaWithKvcacheArgs;
}

function rejects(over: Partial<Record<keyof FlashMlaWithKvcacheArgs, unknown>>, argument: string, pattern: RegExp, requireCuda = false): void {
  assert.throws(
    () => validateDenseArgs(args(over), requireCuda),
    (e: unknown) => {
      assert.ok(e instanceof ArgumentError, `expected ArgumentError, got ${String(e)}`);
      assert.equal(e.argument, argument);
      assert.match(e.message, /^flashMlaWithKvcache\(\): argument '/);
      assert.match(e.message, pattern);
      return true;
    },
  );
}

test("validateDenseArgs() accepts a well-formed dense call and reports its shape", () => {
  const a = args({ causal: true });
  const { q, kCache, blockTable, cacheSeqlens, ...s } = validateDenseArgs(a, false);
  assert.deepEqual(s, { b: 2, s_q: 2, h_q: 8, h_kv: 2, d_qk: 576, num_blocks: 4, max_blocks_per_seq: 3, softmax_scale: 1 / 24, causal: true });
  assert.deepEqual([q, kCache, blockTable, cacheSeqlens], [a.q, a.kCache, a.blockTable, a.cacheSeqlens], "the checked tensors are the given ones");
  assert.equal(validateDenseArgs(args({ q: Tensor.zerosHost([2, 1, 8, 576], "bf16"), causal: true }), false).causal, false, "s_q = 1 turns causal off");
});

test("validateDenseArgs() names q's dtype, rank, head dim, batch and layout errors", () => {
  rejects({ q: Tensor.zerosHost([2, 2, 8, 576], "f32") }, "q", /expected dtype bf16 or fp16, got f32/);
  rejects({ q: Tensor.zerosHost([2, 8, 576], "bf16") }, "q", /expected rank 4 \[b, s_q, h_q, d_qk\], got rank 3 \[2, 8, 576\]/);
  rejects({ q: Tensor.zerosHost([2, 2, 8, 504], "bf16") }, "q", /d_qk = 576 \(DeepSeek-V3's head\) or 512 \(DeepSeek-V4's\) on the dense path, got 504/);
  rejects({ q: Tensor.zerosHost([0, 2, 8, 576], "bf16"), blockTable: Tensor.zerosHost([0, 3], "i32"), cacheSeqlens: Tensor.zerosHost([0], "i32") }, "q", /b >= 1/);
  rejects({ q: Tensor.zerosHost([2, 0, 8, 576], "bf16") }, "q", /s_q >= 1/);
  rejects({ q: Tensor.zerosHost([2, 2, 0, 576], "bf16") }, "q", /h_q >= 1/);
  rejects({ q: "not a tensor" }, "q", /expected a Tensor, got string/);
  const strided = Tensor.zerosHost([2, 2, 8, 1152], "bf16").view([2, 2, 8, 576], [2 * 8 * 1152, 8 * 1152, 1152, 2]);
  rejects({ q: strided }, "q", /stride 1 in the last dimension/);
  const odd = Tensor.zerosHost([2 * 2 * 8 * 577], "bf16").view([2, 2, 8, 576], [2 * 8 * 577, 8 * 577, 577, 1]);
  rejects({ q: odd }, "q", /multiples of 16 bytes/);
});

test("validateDenseArgs() names kCache's dtype, page size, head count and shape errors", () => {
  rejects({ kCache: Tensor.zerosHost([4, 64, 2, 576], "fp16") }, "kCache", /expected dtype bf16, got fp16/);
  rejects({ kCache: Tensor.zerosHost([4, 32, 2, 576], "bf16") }, "kCache", /page_block_size = 64.*got 32/);
  rejects({ kCache: Tensor.zerosHost([4, 64, 3, 576], "bf16") }, "kCache", /h_kv >= 1 dividing h_q = 8, got h_kv = 3/);
  rejects({ kCache: Tensor.zerosHost([4, 64, 2, 512], "bf16") }, "kCache", /d_qk = 576, q's/);
  rejects({ kCache: Tensor.zerosHost([0, 64, 2, 576], "bf16") }, "kCache", /num_blocks >= 1/);
});

test("validateDenseArgs() names blockTable, cacheSeqlens, headDimV, softmaxScale, causal and schedMeta errors", () => {
  rejects({ blockTable: undefined }, "blockTable", /int32 tensor \[b, max_blocks_per_seq\].*got undefined/);
  rejects({ blockTable: Tensor.zerosHost([2, 3], "f32") }, "blockTable", /dtype i32, got f32/);
  rejects({ blockTable: Tensor.zerosHost([3, 3], "i32") }, "blockTable", /b = 2.*got 3/);
  rejects({ cacheSeqlens: undefined }, "cacheSeqlens", /got undefined/);
  rejects({ cacheSeqlens: Tensor.zerosHost([3], "i32") }, "cacheSeqlens", /b = 2.*got 3/);
  rejects({ cacheSeqlens: Tensor.zerosHost([2], "i32").view([2], [2]) }, "cacheSeqlens", /contiguous/);
  rejects({ headDimV: 576 }, "headDimV", /expected 512, got number 576/);
  rejects({ softmaxScale: 0 }, "softmaxScale", /finite number > 0, got number 0/);
  rejects({ softmaxScale: NaN }, "softmaxScale", /finite number > 0/);
  rejects({ causal: 1 }, "causal", /a boolean, got number/);
  rejects({ schedMeta: {} }, "schedMeta", /getMlaMetadata\(\) returns/);
  rejects({ out: Tensor.zerosHost([2, 2, 8, 512], "fp16") }, "out", /dtype bf16/);
  rejects({ lse: Tensor.zerosHost([2, 2, 8], "f32") }, "lse", /h_q = 8.*got 2/);
});

test("validateDenseArgs() refuses sparse arguments, saying they belong to a call with indices", () => {
  rejects({ indices: Tensor.zerosHost([2, 2, 64], "i32") }, "indices", /dense path here \(isFp8Kvcache, topkLength and attnSink belong to a sparse call, which passes indices\)/);
  rejects({ isFp8Kvcache: true }, "isFp8Kvcache", /dense path/);
  rejects({ attnSink: Tensor.zerosHost([8], "f32") }, "attnSink", /dense path/);
});

test("validateDenseArgs() refuses DeepSeek-V4's second cache by name on the dense path, where no kernel reads it", () => {
  // A dropped second cache would be a silently wrong softmax, so each is named rather than ignored.
  const why = /expected undefined on the dense path \(the second cache is read by sparse decode \(with indices\) only\), got Tensor$/;
  rejects({ extraKCache: Tensor.zerosHost([1, 64, 1, 584], "u8") }, "extraKCache", why);
  rejects({ extraIndices: Tensor.zerosHost([2, 2, 8], "i32") }, "extraIndices", why);
  rejects({ extraTopkLength: Tensor.zerosHost([2], "i32") }, "extraTopkLength", why);
  // With DeepSeek-V4's 512-wide q and cache as well: the head is dense decode's, the second cache is not.
  const v4 = { q: Tensor.zerosHost([2, 2, 8, 512], "bf16"), kCache: Tensor.zerosHost([4, 64, 2, 512], "bf16") };
  rejects({ ...v4, extraKCache: Tensor.zerosHost([1, 64, 1, 584], "u8") }, "extraKCache", why);
  rejects({ ...v4, extraIndices: Tensor.zerosHost([2, 2, 8], "i32"), extraTopkLength: Tensor.zerosHost([2], "i32") }, "extraIndices", why);
  // Before the tensors' own checks, and on the GPU path too.
  rejects({ extraKCache: "not a tensor" }, "extraKCache", /on the dense path.*got string not a tensor$/);
  rejects({ extraKCache: Tensor.zerosHost([1, 64, 1, 584], "u8") }, "extraKCache", /on the dense path/, true);
  assert.throws(() => decodeWithOverrides(args({ extraKCache: Tensor.zerosHost([1, 64, 1, 584], "u8") }), {}), /argument 'extraKCache': expected undefined on the dense path/);
});

test("validateDenseArgs() takes DeepSeek-V4's d_qk 512 (q and kCache 512 wide), bf16 or fp16, with the scale 512^-0.5 by default", () => {
  for (const dtype of ["bf16", "fp16"] as const) {
    const a = args({ q: Tensor.zerosHost([2, 2, 8, 512], dtype), kCache: Tensor.zerosHost([4, 64, 2, 512], dtype), causal: true });
    const { q, kCache, blockTable, cacheSeqlens, ...s } = validateDenseArgs(a, false);
    assert.deepEqual(s, { b: 2, s_q: 2, h_q: 8, h_kv: 2, d_qk: 512, num_blocks: 4, max_blocks_per_seq: 3, softmax_scale: 512 ** -0.5, causal: true }, dtype);
    assert.deepEqual([q, kCache, blockTable, cacheSeqlens], [a.q, a.kCache, a.blockTable, a.cacheSeqlens]);
  }
  // A given scale is kept; a 512-wide view of 576-wide rows is a 512-wide q.
  const q = Tensor.zerosHost([2, 2, 8, 576], "bf16").view([2, 2, 8, 512], [2 * 8 * 576, 8 * 576, 576, 1]);
  assert.equal(validateDenseArgs(args({ q, kCache: Tensor.zerosHost([4, 64, 2, 512], "bf16"), softmaxScale: 0.1 }), false).softmax_scale, 0.1);
});

test("validateDenseArgs() requires kCache's last dim to be q's d_qk, naming both widths", () => {
  const D = "flashMlaWithKvcache(): argument";
  const both = "the dense path takes 576 or 512, the same in q and kCache";
  rejectsWithMessage("a 576-wide cache under a 512-wide q", () => validateDenseArgs(args({ q: Tensor.zerosHost([2, 2, 8, 512], "bf16") }), false),
    `${D} 'kCache': expected d_qk = 512, q's (${both}), got 576 (shape [4, 64, 2, 576])`);
  rejectsWithMessage("a 512-wide cache under a 576-wide q", () => validateDenseArgs(args({ kCache: Tensor.zerosHost([4, 64, 2, 512], "bf16") }), false),
    `${D} 'kCache': expected d_qk = 576, q's (${both}), got 512 (shape [4, 64, 2, 512])`);
  rejectsWithMessage("a 513-wide cache under a 512-wide q", () => validateDenseArgs(args({ q: Tensor.zerosHost([2, 2, 8, 512], "fp16"), kCache: Tensor.zerosHost([4, 64, 2, 520], "fp16") }), false),
    `${D} 'kCache': expected d_qk = 512, q's (${both}), got 520 (shape [4, 64, 2, 520])`);
  rejectsWithMessage("a q neither 576 nor 512 wide", () => validateDenseArgs(args({ q: Tensor.zerosHost([2, 2, 8, 640], "bf16") }), false),
    `${D} 'q': expected d_qk = 576 (DeepSeek-V3's head) or 512 (DeepSeek-V4's) on the dense path, got 640 (shape [2, 2, 8, 640])`);
  // The fp32 GPU reference shares the checks under its own name.
  rejectsWithMessage("the GPU reference's checks", () => validateDenseArgs(args({ q: Tensor.zerosHost([2, 2, 8, 512], "bf16") }), false, "mlaDecodeReferenceGpu"),
    `mlaDecodeReferenceGpu(): argument 'kCache': expected d_qk = 512, q's (${both}), got 576 (shape [4, 64, 2, 576])`);
});

test("validateDenseArgs() requires CUDA tensors on the GPU path", () => {
  rejects({}, "q", /a CUDA tensor, got a cpu tensor/, true);
});

test("MlaSchedMeta reused with another batch shape names the changed field", () => {
  const config = { b: 2, s_q: 1, h_q: 128, h_kv: 1, page_block_size: 64, causal: false, is_fp8_kvcache: false, topk: null };
  const meta = MlaSchedMeta.withConfig(config);
  assert.equal(meta.initialized, true);
  assert.deepEqual(meta.config, config);
  assert.doesNotThrow(() => meta.checkConfig("f", { ...config }));
  assert.throws(() => meta.checkConfig("f", { ...config, h_q: 64 }), /argument 'schedMeta': expected metadata for h_q = 128 .*got h_q = 64/);
  assert.throws(() => meta.checkConfig("f", { ...config, b: 3 }), /b = 2.*got b = 3/);
  meta.dispose();
  meta.dispose();
  assert.equal(meta.isDisposed, true);
  assert.throws(() => meta.checkConfig("f", { ...config }), /disposed/);
});

test("chooseDenseKernel() picks pipe for compute-bound calls (≥ 128 rows per KV head) whose SM parts walk ≥ 16 blocks", () => {
  assert.equal(chooseDenseKernel(128, 248), "pipe"); // dense-compute, long-b4-128k-mtp
  assert.equal(chooseDenseKernel(256, 16), "pipe");
  assert.equal(chooseDenseKernel(128, 31), "pipe"); // long-b1-128k
  assert.equal(chooseDenseKernel(128, 7.8), "fast"); // dense-b1
  assert.equal(chooseDenseKernel(127, 1000), "fast");
  assert.equal(chooseDenseKernel(64, 1000), "fast");
  assert.equal(denseBlocksPerPart(1, 512, 66), 512 / 66);
  for (const f of [chooseDenseKernel(128, 100), chooseDenseKernel(1, 1)]) assert.ok(DENSE_FORMS.includes(f), `${f} is a dense form`);
  assert.equal(denseKernelName("pipe", "fp16", 576), "dense_pipe_fp16");
  assert.equal(denseKernelName("fast", "bf16", 576), "dense_fast_bf16");
});

test("denseKernelName() names the _d512 rows for a 512-wide head, and refuses other widths", () => {
  assert.equal(denseKernelName("fast", "bf16", 512), "dense_fast_bf16_d512");
  assert.equal(denseKernelName("pipe", "bf16", 512), "dense_pipe_bf16_d512");
  assert.equal(denseKernelName("fast", "fp16", 512), "dense_fast_fp16_d512");
  assert.equal(denseKernelName("pipe", "fp16", 512), "dense_pipe_fp16_d512");
  rejectsWithMessage("d_qk 500", () => denseKernelName("fast", "bf16", 500), "denseKernelName(): argument 'd_qk': expected 576 or 512, got 500");
  // The form rule does not look at the head: the same choice at either width.
  const b1 = { kind: "dense", b: 1, s_q: 1, h_q: 128 } as const;
  assert.equal(chooseKernel({ ...b1, d_qk: 512, maxLen: 32768 }), "dense_fast_bf16_d512");
  assert.equal(chooseKernel({ ...b1, d_qk: 512, maxLen: 131072 }), "dense_pipe_bf16_d512");
  assert.equal(chooseKernel({ kind: "dense", b: 128, s_q: 1, h_q: 128, d_qk: 512, dtype: "fp16" }, { denseForm: "fast" }), "dense_fast_fp16_d512");
  assert.equal(chooseKernel({ kind: "dense", b: 128, s_q: 1, h_q: 128, d_qk: 576 }), "dense_pipe_bf16");
});

test("chooseKernel() names the dense form from the longest request: one 32K request fast, one 128K request pipe", () => {
  const b1 = { kind: "dense", b: 1, s_q: 1, h_q: 128 } as const;
  assert.equal(chooseKernel({ ...b1, maxLen: 32768 }), "dense_fast_bf16");
  assert.equal(chooseKernel({ ...b1, maxLen: 131072 }), "dense_pipe_bf16");
  assert.equal(chooseKernel(b1), "dense_pipe_bf16");
  assert.equal(chooseKernel({ kind: "dense", b: 4, s_q: 2, h_q: 128, maxLen: 131072 }), "dense_pipe_bf16");
  assert.equal(chooseKernel({ kind: "dense", b: 128, s_q: 1, h_q: 16, maxLen: 8192 }), "dense_fast_bf16");
});

test("decodeWithOverrides() refuses a form that does not exist, a non-boolean mergeSplitPairs and a sparse plan, naming the override, before it looks at the tensors", () => {
  const refused = (overrides: Record<string, unknown>, argument: string, pattern: RegExp) =>
    assert.throws(() => decodeWithOverrides(args(), overrides), (e: unknown) => e instanceof ArgumentError && e.argument === argument && pattern.test(e.message));
  refused({ denseForm: "seesaw" }, "overrides.denseForm", /"fast" or "pipe", got "seesaw"/);
  refused({ mergeSplitPairs: "no" }, "overrides.mergeSplitPairs", /a boolean, got string/);
  refused({ sparsePlan: "m64" }, "overrides.sparsePlan", /undefined on the dense path/);
  // A valid override reaches the argument checks (host tensors: the residency check).
  assert.throws(() => decodeWithOverrides(args(), { denseForm: "pipe", mergeSplitPairs: false }), /argument 'q': expected a CUDA tensor/);
});
