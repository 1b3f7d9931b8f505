import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../../src/errors/ArgumentError.js";
import { validateWriteKvCacheModel1Args, type WriteKvCacheModel1Args } from "../../../../src/mla/kvCache/writeKvCacheModel1.js";
import type { DType } from "../../../../src/runtime/dtype.js";
import { Tensor } from "../../../../src/runtime/Tensor.js";
import { rejectsWithMessage as rejects } from "../../../helpers/argumentError.js";

// writeKvCacheModel1's checks without a GPU: host tensors stand in (requireCuda = false). The checks
// that need device memory (residency, alignment of the address, devices) run in
// test/gpu/mla/model1KvWriter.test.ts.

const host = (shape: readonly number[], dtype: DType) => Tensor.zerosHost(shape, dtype);
const W = "writeKvCacheModel1(): argument";

/** A valid call: 5 tokens into 3 pages of 4 tokens with FlashMLA's block stride, model1PageBytes(4) = 2,880 bytes. */
function writer(over: Record<string, unknown> = {}): WriteKvCacheModel1Args {
  return { kv: host([5, 512], "bf16"), slotMapping: host([5], "i32"), cache: paged(3, 4, 2880), ...over } as WriteKvCacheModel1Args;
}

/** A [numBlocks, pbs, 1, 584] view with block stride `stride` bytes over a flat host buffer. */
function paged(numBlocks: number, pbs: number, stride: number, dtype: DType = "u8"): Tensor {
  return host([numBlocks * stride], dtype).view([numBlocks, pbs, 1, 584], [stride, 584, 584, 1]);
}

test("validateWriteKvCacheModel1Args() names every argument's dtype, shape, layout and size mismatch", () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["kv missing", { kv: undefined }, `${W} 'kv': expected a Tensor, got undefined`],
    ["kv fp16", { kv: host([5, 512], "fp16") }, `${W} 'kv': expected dtype bf16, got fp16`],
    ["kv V3.2 tokens (576 dims)", { kv: host([5, 576], "bf16") }, `${W} 'kv': expected d_qk = 512 (shape [num_tokens, 512]), got 576 (shape [5, 576])`],
    ["kv rows not 16-byte aligned", { kv: host([5 * 516], "bf16").view([5, 512], [516, 1]) }, `${W} 'kv': expected strides that are multiples of 16 bytes, got stride 516 elements in dim num_tokens`],
    ["slotMapping for 4 tokens", { slotMapping: host([4], "i32") }, `${W} 'slotMapping': expected num_tokens = 5 (shape [5]), got 4 (shape [4])`],
    ["slotMapping f32", { slotMapping: host([5], "f32") }, `${W} 'slotMapping': expected dtype i32, got f32`],
    ["cache bf16", { cache: host([3, 4, 1, 292], "bf16") }, `${W} 'cache': expected dtype u8 or fp8_e4m3, got bf16`],
    ["cache V3.2 tokens (656 bytes)", { cache: host([3, 4, 1, 656], "u8") }, `${W} 'cache': expected token_bytes = 584 (shape [num_blocks, page_block_size, 1, 584]), got 656 (shape [3, 4, 1, 656])`],
    ["cache rank 3", { cache: host([3, 4, 584], "u8") }, `${W} 'cache': expected rank 4 [num_blocks, page_block_size, h_kv, token_bytes], got rank 3 [3, 4, 584]`],
    ["cache empty pages", { cache: host([3, 0, 1, 584], "u8") }, `${W} 'cache': expected page_block_size >= 1, got 0 (shape [3, 0, 1, 584])`],
    ["cache token stride 576", { cache: host([3 * 2880], "u8").view([3, 4, 1, 584], [2880, 576, 576, 1]) }, `${W} 'cache': expected a token stride of 584 bytes, got 576`],
    ["cache pages overlap", { cache: paged(3, 4, 2320) }, `${W} 'cache': expected a block stride that is a multiple of 16 bytes and at least page_block_size · 584 = 2336 (model1PageBytes(4) = 2880), got 2320`],
    ["cache block stride 2344", { cache: paged(3, 4, 2344) }, `${W} 'cache': expected a block stride that is a multiple of 16 bytes and at least page_block_size · 584 = 2336 (model1PageBytes(4) = 2880), got 2344`],
    ["pageBlockSize 0", { pageBlockSize: 0 }, `${W} 'pageBlockSize': expected an integer >= 1 (tokens per page) or undefined, got 0`],
    ["pageBlockSize not the cache's", { pageBlockSize: 64 }, `${W} 'cache': expected page_block_size = 64 (shape [num_blocks, 64, 1, 584]), got 4 (shape [3, 4, 1, 584])`],
    ["stream not a Stream", { stream: 7 }, `${W} 'stream': expected a Stream (Stream.create()) or undefined, got number 7`],
  ];
  rejects("args null", () => validateWriteKvCacheModel1Args(null as never, false), `${W} 'args': expected an options object, got null`);
  for (const [what, over, message] of cases) rejects(what, () => validateWriteKvCacheModel1Args(writer(over), false), message);
});

test("validateWriteKvCacheModel1Args() takes any page size, padded or packed pages, and fp8 views", () => {
  for (const [pbs, stride] of [[1, 1152], [2, 1728], [64, 37440], [256, 149760], [72, 72 * 584], [3, 3 * 584 + 8]]) {
    const checked = validateWriteKvCacheModel1Args(writer({ cache: paged(2, pbs, stride), pageBlockSize: pbs }), false);
    assert.deepEqual([checked.pageBlockSize, checked.blockStrideBytes], [pbs, stride], `pbs ${pbs}`);
  }
  // One page: its stride is never used; the launcher passes model1PageBytes.
  assert.equal(validateWriteKvCacheModel1Args(writer({ cache: host([1, 64, 1, 584], "fp8_e4m3") }), false).blockStrideBytes, 37440);
  assert.equal(validateWriteKvCacheModel1Args(writer({ kv: host([0, 512], "bf16"), slotMapping: host([0], "i32") }), false).kv.shape[0], 0);
});
