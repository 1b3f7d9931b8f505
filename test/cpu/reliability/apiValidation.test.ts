import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { quantizeKvCacheFp8, validateWriteKvCacheFp8Args, type WriteKvCacheFp8Args } from "../../../src/mla/kvCache/writeKvCacheFp8.js";
import { mlaDecodeReferenceGpu, validateReferenceGpuArgs, type MlaDecodeReferenceGpuArgs } from "../../../src/mla/reference/mlaDecodeReferenceGpu.js";
import { getMlaMetadata, MlaSchedMeta, type MlaSchedConfig } from "../../../src/mla/sched/MlaSchedMeta.js";
import { quantizeKvCacheV32 } from "../../../src/numeric/kvCacheFp8.js";
import { randomBf16, Rng } from "../../../src/numeric/random.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { dtypeSize, type DType } from "../../../src/runtime/dtype.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { contiguousStrides, Tensor } from "../../../src/runtime/Tensor.js";
import { validateDenseArgs } from "../../../src/mla/dense/validateDense.js";
import { validateSparseArgs } from "../../../src/mla/sparse/validateSparse.js";
import { type FlashMlaWithKvcacheArgs } from "../../../src/mla/args.js";
import { rejectsWithMessage as rejects } from "../../helpers/argumentError.js";

// The validation matrix of the public functions that take tensors: every argument, wrong dtype, rank,
// shape, device, layout, out-of-range scalar and mismatched sizes between arguments. Each error must
// name the function, the argument, what was expected and what was given, so each case pins the whole
// message. test/cpu/mla/dense/validateDense.test.ts holds the first dense cases; these extend them.

/** Fake GPU memory: a DeviceBuffer-shaped object. Nothing reads through it; never dispose it. */
function fakeBuffer(sizeBytes: number, deviceOrdinal: number): DeviceBuffer {
  return Object.defineProperties(Object.create(DeviceBuffer.prototype), {
    ptr: { value: 1n << 32n },
    sizeBytes: { value: sizeBytes },
    deviceOrdinal: { value: deviceOrdinal },
  }) as DeviceBuffer;
}

interface FakeOptions {
  device?: number;
  strides?: readonly number[];
  /** Shifts the data pointer (misalignment). */
  byteOffset?: number;
}

/** A "CUDA" tensor over fake memory, for checks that must see a GPU tensor but never touch it. */
function cuda(shape: readonly number[], dtype: DType, o: FakeOptions = {}): Tensor {
  const strides = o.strides ?? contiguousStrides(shape);
  const span = shape.reduce((m, n, i) => m + (n - 1) * strides[i], 0) + 1;
  const byteOffset = o.byteOffset ?? 0;
  return Tensor.fromDeviceBuffer(fakeBuffer(byteOffset + span * dtypeSize(dtype), o.device ?? 0), shape, dtype, { strides, byteOffset });
}

/** A fake Stream on `deviceOrdinal`. */
function fakeStream(deviceOrdinal: number): Stream {
  return Object.defineProperties(Object.create(Stream.prototype), { deviceOrdinal: { value: deviceOrdinal } }) as Stream;
}

const host = (shape: readonly number[], dtype: DType) => Tensor.zerosHost(shape, dtype);
const any = <T>(v: unknown) => v as T;

/** Runs `fn` and checks it throws an ArgumentError whose message is exactly `message`. */

// ---------------------------------------------------------------------------------------------------
// flashMlaWithKvcache (validateDenseArgs)

type Tensors = (shape: readonly number[], dtype: DType) => Tensor;

/** A valid dense call: b = 2, s_q = 2, h_q = 8, h_kv = 2, 4 blocks, 3 table columns. */
function dense(make: Tensors, over: Record<string, unknown> = {}): FlashMlaWithKvcacheArgs {
  return {
    q: make([2, 2, 8, 576], "bf16"),
    kCache: make([4, 64, 2, 576], "bf16"),
    blockTable: make([2, 3], "i32"),
    cacheSeqlens: make([2], "i32"),
    headDimV: 512,
    schedMeta: getMlaMetadata(),
    ...over,
  } as FlashMlaWithKvcacheArgs;
}

const D = "flashMlaWithKvcache(): argument";

test("validateDenseArgs() names every argument's dtype, rank, shape and layout error (host tensors)", () => {
  const bf16 = (shape: number[]) => host(shape, "bf16");
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["q missing", { q: undefined }, `${D} 'q': expected a Tensor, got undefined`],
    ["q a typed array", { q: new Uint16Array(4) }, `${D} 'q': expected a Tensor, got Uint16Array`],
    ["q rank 5", { q: bf16([1, 2, 2, 8, 576]) }, `${D} 'q': expected rank 4 [b, s_q, h_q, d_qk], got rank 5 [1, 2, 2, 8, 576]`],
    ["q i32", { q: host([2, 2, 8, 576], "i32") }, `${D} 'q': expected dtype bf16 or fp16, got i32`],
    ["q b over the grid limit", { q: bf16([576]).view([65536, 1, 1, 576], [0, 576, 576, 1]) }, `${D} 'q': expected b <= 65535 (a launch grid dimension), got b = 65536`],
    ["kCache missing", { kCache: undefined }, `${D} 'kCache': expected a Tensor, got undefined`],
    ["kCache rank 3", { kCache: bf16([4, 64, 576]) }, `${D} 'kCache': expected rank 4 [num_blocks, page_block_size, h_kv, d_qk], got rank 3 [4, 64, 576]`],
    ["kCache u8 (an FP8 cache on the dense path)", { kCache: host([4, 64, 2, 656], "u8") }, `${D} 'kCache': expected dtype bf16, got u8`],
    ["kCache last dim strided", { kCache: bf16([4, 64, 2, 1152]).view([4, 64, 2, 576], [64 * 2 * 1152, 2 * 1152, 1152, 2]) }, `${D} 'kCache': expected stride 1 in the last dimension, got strides [147456, 2304, 1152, 2]`],
    ["kCache head stride not 16-byte aligned", { kCache: bf16([4 * 64 * 2 * 580]).view([4, 64, 2, 576], [64 * 2 * 580, 2 * 580, 580, 1]) }, `${D} 'kCache': expected strides that are multiples of 16 bytes, got stride 580 elements in dim h_kv`],
    ["kCache h_kv over the grid limit", { q: bf16([576]).view([2, 2, 65536, 576], [0, 0, 0, 1]), kCache: bf16([576]).view([4, 64, 65536, 576], [0, 0, 0, 1]) }, `${D} 'kCache': expected h_kv <= 65535 (a launch grid dimension), got h_kv = 65536`],
    ["blockTable rank 1", { blockTable: host([6], "i32") }, `${D} 'blockTable': expected rank 2 [b, max_blocks_per_seq], got rank 1 [6]`],
    ["blockTable u8", { blockTable: host([2, 3], "u8") }, `${D} 'blockTable': expected dtype i32, got u8`],
    ["blockTable column-major", { blockTable: host([6], "i32").view([2, 3], [1, 2]) }, `${D} 'blockTable': expected stride 1 in the last dimension, got strides [1, 2]`],
    ["cacheSeqlens f32", { cacheSeqlens: host([2], "f32") }, `${D} 'cacheSeqlens': expected dtype i32, got f32`],
    ["cacheSeqlens rank 2", { cacheSeqlens: host([2, 1], "i32") }, `${D} 'cacheSeqlens': expected rank 1 [b], got rank 2 [2, 1]`],
    ["headDimV missing", { headDimV: undefined }, `${D} 'headDimV': expected 512, got undefined`],
    ["headDimV a string", { headDimV: "512" }, `${D} 'headDimV': expected 512, got string 512`],
    ["headDimV NaN", { headDimV: NaN }, `${D} 'headDimV': expected 512, got number NaN`],
    ["softmaxScale negative", { softmaxScale: -0.1 }, `${D} 'softmaxScale': expected a finite number > 0, got number -0.1`],
    ["softmaxScale +inf", { softmaxScale: Infinity }, `${D} 'softmaxScale': expected a finite number > 0, got number Infinity`],
    ["softmaxScale a string", { softmaxScale: "0.05" }, `${D} 'softmaxScale': expected a finite number > 0, got string 0.05`],
    ["causal a string", { causal: "true" }, `${D} 'causal': expected a boolean, got string`],
    ["schedMeta missing", { schedMeta: undefined }, `${D} 'schedMeta': expected the object getMlaMetadata() returns, got undefined`],
    ["stream not a Stream", { stream: { handle: 0n } }, `${D} 'stream': expected a Stream (Stream.create()) or undefined, got Object`],
    ["out rank 3", { out: bf16([2, 2, 4096]) }, `${D} 'out': expected rank 4 [b, s_q, h_q, d_v], got rank 3 [2, 2, 4096]`],
    ["out with 576 columns", { out: bf16([2, 2, 8, 576]) }, `${D} 'out': expected d_v = 512 (shape [2, 2, 8, 512]), got 576 (shape [2, 2, 8, 576])`],
    ["out for another batch", { out: bf16([3, 2, 8, 512]) }, `${D} 'out': expected b = 2 (shape [2, 2, 8, 512]), got 3 (shape [3, 2, 8, 512])`],
    ["out non-contiguous", { out: bf16([2, 2, 8, 1024]).view([2, 2, 8, 512], [2 * 8 * 1024, 8 * 1024, 1024, 1]) }, `${D} 'out': expected a contiguous tensor, got strides [16384, 8192, 1024, 1]`],
    ["lse bf16", { lse: bf16([2, 8, 2]) }, `${D} 'lse': expected dtype f32, got bf16`],
    ["lse [b, s_q, h_q] (transposed)", { lse: host([2, 2, 8], "f32") }, `${D} 'lse': expected h_q = 8 (shape [2, 8, 2]), got 2 (shape [2, 2, 8])`],
    ["lse non-contiguous", { lse: host([2, 8, 2], "f32").view([2, 8, 2], [16, 1, 8]) }, `${D} 'lse': expected a contiguous tensor, got strides [16, 1, 8]`],
  ];
  rejects("args null", () => validateDenseArgs(any(null), false), `${D} 'args': expected an options object, got null`);
  for (const [what, over, message] of cases) rejects(what, () => validateDenseArgs(dense(host, over), false), message);
});

test("validateDenseArgs() names mismatched sizes between arguments", () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["kCache fp16 with bf16 q", { kCache: host([4, 64, 2, 576], "fp16") }, `${D} 'kCache': expected dtype bf16, got fp16`],
    ["h_q not a multiple of h_kv", { kCache: host([4, 64, 3, 576], "bf16") }, `${D} 'kCache': expected h_kv >= 1 dividing h_q = 8, got h_kv = 3`],
    ["h_kv = 0", { kCache: host([4, 64, 0, 576], "bf16") }, `${D} 'kCache': expected h_kv >= 1 dividing h_q = 8, got h_kv = 0`],
    ["blockTable for 3 requests", { blockTable: host([3, 3], "i32") }, `${D} 'blockTable': expected b = 2 (shape [2, max_blocks_per_seq]), got 3 (shape [3, 3])`],
    ["cacheSeqlens for 1 request", { cacheSeqlens: host([1], "i32") }, `${D} 'cacheSeqlens': expected b = 2 (shape [2]), got 1 (shape [1])`],
    ["out fp16 with bf16 q", { out: host([2, 2, 8, 512], "fp16") }, `${D} 'out': expected dtype bf16, got fp16`],
    ["out for another s_q", { out: host([2, 1, 8, 512], "bf16") }, `${D} 'out': expected s_q = 2 (shape [2, 2, 8, 512]), got 1 (shape [2, 1, 8, 512])`],
    ["lse for another s_q", { lse: host([2, 8, 1], "f32") }, `${D} 'lse': expected s_q = 2 (shape [2, 8, 2]), got 1 (shape [2, 8, 1])`],
  ];
  for (const [what, over, message] of cases) rejects(what, () => validateDenseArgs(dense(host, over), false), message);
  // fp16 is accepted when every tensor agrees, and a table wider than needed is fine.
  assert.equal(validateDenseArgs(dense(host, { q: host([2, 2, 8, 576], "fp16"), kCache: host([4, 64, 2, 576], "fp16"), blockTable: host([2, 9], "i32") }), false).max_blocks_per_seq, 9);
});

test("validateDenseArgs() on the GPU path names host tensors, devices, alignment and streams", () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["q on the host", { q: host([2, 2, 8, 576], "bf16") }, `${D} 'q': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`],
    ["kCache on the host", { kCache: host([4, 64, 2, 576], "bf16") }, `${D} 'kCache': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`],
    ["blockTable on the host", { blockTable: host([2, 3], "i32") }, `${D} 'blockTable': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`],
    ["cacheSeqlens on the host", { cacheSeqlens: Tensor.fromHost(Int32Array.of(1, 2), [2], "i32") }, `${D} 'cacheSeqlens': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`],
    ["out on the host", { out: host([2, 2, 8, 512], "bf16") }, `${D} 'out': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`],
    ["lse on the host", { lse: host([2, 8, 2], "f32") }, `${D} 'lse': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`],
    ["q data 2 bytes off 16", { q: cuda([2, 2, 8, 576], "bf16", { byteOffset: 2 }) }, `${D} 'q': expected data aligned to 16 bytes, got address 0x100000002`],
    ["kCache data 8 bytes off 16", { kCache: cuda([4, 64, 2, 576], "bf16", { byteOffset: 8 }) }, `${D} 'kCache': expected data aligned to 16 bytes, got address 0x100000008`],
    ["out data 4 bytes off 16", { out: cuda([2, 2, 8, 512], "bf16", { byteOffset: 4 }) }, `${D} 'out': expected data aligned to 16 bytes, got address 0x100000004`],
    ["kCache on another GPU", { kCache: cuda([4, 64, 2, 576], "bf16", { device: 1 }) }, `${D} 'kCache': expected the device of 'q' (cuda:0), got cuda:1`],
    ["blockTable on another GPU", { blockTable: cuda([2, 3], "i32", { device: 1 }) }, `${D} 'blockTable': expected the device of 'q' (cuda:0), got cuda:1`],
    ["cacheSeqlens on another GPU", { cacheSeqlens: cuda([2], "i32", { device: 3 }) }, `${D} 'cacheSeqlens': expected the device of 'q' (cuda:0), got cuda:3`],
    ["lse on another GPU", { lse: cuda([2, 8, 2], "f32", { device: 1 }) }, `${D} 'lse': expected the device of 'q' (cuda:0), got cuda:1`],
    ["stream on another GPU", { stream: fakeStream(1) }, `${D} 'stream': expected a stream on q's device (cuda:0), got a stream on cuda:1`],
  ];
  for (const [what, over, message] of cases) rejects(what, () => validateDenseArgs(dense(cuda, over)), message);

  // Metadata filled on one GPU holds that GPU's pointers.
  const meta = new (class extends MlaSchedMeta {
    override get deviceOrdinal(): number {
      return 1;
    }
  })();
  rejects("schedMeta from another GPU", () => validateDenseArgs(dense(cuda, { schedMeta: meta })), `${D} 'schedMeta': expected metadata filled on q's device (cuda:0), got metadata filled on cuda:1`);
  assert.deepEqual(validateDenseArgs(dense(cuda, { stream: fakeStream(0), out: cuda([2, 2, 8, 512], "bf16"), lse: cuda([2, 8, 2], "f32") })).b, 2);
});

test("MlaSchedMeta reused for another batch names each field that changed, old and new value", () => {
  const base: MlaSchedConfig = { b: 4, s_q: 2, h_q: 64, h_kv: 1, page_block_size: 64, causal: true, is_fp8_kvcache: false, topk: null };
  const changed: Array<[keyof MlaSchedConfig, MlaSchedConfig[keyof MlaSchedConfig], string]> = [
    ["b", 5, "b = 4 (it was filled for that batch; call getMlaMetadata() again for a new shape), got b = 5"],
    ["s_q", 1, "s_q = 2 (it was filled for that batch; call getMlaMetadata() again for a new shape), got s_q = 1"],
    ["h_q", 128, "h_q = 64 (it was filled for that batch; call getMlaMetadata() again for a new shape), got h_q = 128"],
    ["h_kv", 2, "h_kv = 1 (it was filled for that batch; call getMlaMetadata() again for a new shape), got h_kv = 2"],
    ["page_block_size", 32, "page_block_size = 64 (it was filled for that batch; call getMlaMetadata() again for a new shape), got page_block_size = 32"],
    ["causal", false, "causal = true (it was filled for that batch; call getMlaMetadata() again for a new shape), got causal = false"],
    ["is_fp8_kvcache", true, "is_fp8_kvcache = false (it was filled for that batch; call getMlaMetadata() again for a new shape), got is_fp8_kvcache = true"],
    ["topk", 2048, "topk = null (it was filled for that batch; call getMlaMetadata() again for a new shape), got topk = 2048"],
  ];
  const meta = new MlaSchedMeta();
  meta.checkConfig("f", base); // an empty object accepts any first shape
  const filled = MlaSchedMeta.withConfig(base);
  for (const [key, value, text] of changed) {
    rejects(`reuse with ${key} changed`, () => filled.checkConfig("flashMlaWithKvcache", { ...base, [key]: value }), `${D} 'schedMeta': expected metadata for ${text}`);
  }
  assert.doesNotThrow(() => filled.checkConfig("flashMlaWithKvcache", { ...base }));
});

// ---------------------------------------------------------------------------------------------------
// writeKvCacheFp8 and quantizeKvCacheFp8

/** A valid writer call: 5 tokens into a [3 blocks, 4 slots] cache. */
function writer(make: Tensors, over: Record<string, unknown> = {}): WriteKvCacheFp8Args {
  return { kv: make([5, 576], "bf16"), slotMapping: make([5], "i32"), kCache: make([3, 4, 1, 656], "u8"), ...over } as WriteKvCacheFp8Args;
}

const W = "writeKvCacheFp8(): argument";

test("validateWriteKvCacheFp8Args() names every argument's dtype, shape, layout and size mismatch", () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["kv missing", { kv: undefined }, `${W} 'kv': expected a Tensor, got undefined`],
    ["kv fp16", { kv: host([5, 576], "fp16") }, `${W} 'kv': expected dtype bf16, got fp16`],
    ["kv rank 1", { kv: host([576], "bf16") }, `${W} 'kv': expected rank 2 [num_tokens, d_qk], got rank 1 [576]`],
    ["kv 512 dims", { kv: host([5, 512], "bf16") }, `${W} 'kv': expected d_qk = 576 (shape [num_tokens, 576]), got 512 (shape [5, 512])`],
    ["kv last dim strided", { kv: host([5, 1152], "bf16").view([5, 576], [1152, 2]) }, `${W} 'kv': expected stride 1 in the last dimension, got strides [1152, 2]`],
    ["kv rows not 16-byte aligned", { kv: host([5 * 580], "bf16").view([5, 576], [580, 1]) }, `${W} 'kv': expected strides that are multiples of 16 bytes, got stride 580 elements in dim num_tokens`],
    ["slotMapping missing", { slotMapping: undefined }, `${W} 'slotMapping': expected a Tensor, got undefined`],
    ["slotMapping f32", { slotMapping: host([5], "f32") }, `${W} 'slotMapping': expected dtype i32, got f32`],
    ["slotMapping for 4 tokens", { slotMapping: host([4], "i32") }, `${W} 'slotMapping': expected num_tokens = 5 (shape [5]), got 4 (shape [4])`],
    ["slotMapping strided", { slotMapping: host([10], "i32").view([5], [2]) }, `${W} 'slotMapping': expected a contiguous tensor, got strides [2]`],
    ["kCache bf16", { kCache: host([3, 4, 1, 576], "bf16") }, `${W} 'kCache': expected dtype u8 or fp8_e4m3, got bf16`],
    ["kCache rank 3", { kCache: host([3, 4, 656], "u8") }, `${W} 'kCache': expected rank 4 [num_blocks, page_block_size, h_kv, token_bytes], got rank 3 [3, 4, 656]`],
    ["kCache 2 heads", { kCache: host([3, 4, 2, 656], "u8") }, `${W} 'kCache': expected h_kv = 1 (shape [num_blocks, page_block_size, 1, 656]), got 2 (shape [3, 4, 2, 656])`],
    ["kCache MODEL1 tokens (584 bytes)", { kCache: host([3, 4, 1, 584], "u8") }, `${W} 'kCache': expected token_bytes = 656 (shape [num_blocks, page_block_size, 1, 656]), got 584 (shape [3, 4, 1, 584])`],
    ["kCache token stride 1312", { kCache: host([3, 8, 1, 656], "u8").view([3, 4, 1, 656], [8 * 656, 1312, 656, 1]) }, `${W} 'kCache': expected a token stride of 656 bytes, got 1312`],
    ["kCache block stride 2632", { kCache: host([3 * 2632], "u8").view([3, 4, 1, 656], [2632, 656, 656, 1]) }, `${W} 'kCache': expected a block stride that is a multiple of 16 bytes, got 2632`],
    ["stream not a Stream", { stream: 7 }, `${W} 'stream': expected a Stream (Stream.create()) or undefined, got number 7`],
  ];
  rejects("args null", () => validateWriteKvCacheFp8Args(any(null), false), `${W} 'args': expected an options object, got null`);
  for (const [what, over, message] of cases) rejects(what, () => validateWriteKvCacheFp8Args(writer(host, over), false), message);
  // A larger block stride (padded blocks) and an empty batch are valid.
  assert.equal(validateWriteKvCacheFp8Args(writer(host, { kCache: host([3 * 2640], "u8").view([3, 4, 1, 656], [2640, 656, 656, 1]) }), false).cache.strides[0], 2640);
  assert.equal(validateWriteKvCacheFp8Args(writer(host, { kv: host([0, 576], "bf16"), slotMapping: host([0], "i32") }), false).kv.shape[0], 0);
});

test("validateWriteKvCacheFp8Args() on the GPU path names host tensors, devices, alignment and streams", () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["kv on the host", { kv: host([5, 576], "bf16") }, `${W} 'kv': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`],
    ["slotMapping on the host", { slotMapping: host([5], "i32") }, `${W} 'slotMapping': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`],
    ["kCache on the host", { kCache: host([3, 4, 1, 656], "u8") }, `${W} 'kCache': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`],
    ["kv 2 bytes off 16", { kv: cuda([5, 576], "bf16", { byteOffset: 2 }) }, `${W} 'kv': expected data aligned to 16 bytes, got address 0x100000002`],
    ["kCache 8 bytes off 16", { kCache: cuda([3, 4, 1, 656], "u8", { byteOffset: 8 }) }, `${W} 'kCache': expected data aligned to 16 bytes, got address 0x100000008`],
    ["slotMapping on another GPU", { slotMapping: cuda([5], "i32", { device: 1 }) }, `${W} 'slotMapping': expected the device of 'kv' (cuda:0), got cuda:1`],
    ["kCache on another GPU", { kCache: cuda([3, 4, 1, 656], "u8", { device: 2 }) }, `${W} 'kCache': expected the device of 'kv' (cuda:0), got cuda:2`],
    ["stream on another GPU", { stream: fakeStream(1) }, `${W} 'stream': expected a stream on kv's device (cuda:0), got a stream on cuda:1`],
  ];
  for (const [what, over, message] of cases) rejects(what, () => validateWriteKvCacheFp8Args(writer(cuda, over)), message);
  assert.equal(validateWriteKvCacheFp8Args(writer(cuda, { kCache: cuda([3, 4, 1, 656], "fp8_e4m3"), stream: fakeStream(0) })).cache.dtype, "fp8_e4m3");
});

test("quantizeKvCacheFp8() names bad arguments and quantizes host tensors on the CPU, empty ones included", () => {
  const Q = "quantizeKvCacheFp8(): argument";
  rejects("kv missing", () => quantizeKvCacheFp8(any(undefined)), `${Q} 'kv': expected a Tensor, got undefined`);
  rejects("kv f32", () => quantizeKvCacheFp8(host([2, 576], "f32")), `${Q} 'kv': expected dtype bf16, got f32`);
  rejects("kv [n, 656]", () => quantizeKvCacheFp8(host([2, 656], "bf16")), `${Q} 'kv': expected d_qk = 576 (shape [num_tokens, 576]), got 656 (shape [2, 656])`);
  rejects("kv last dim strided", () => quantizeKvCacheFp8(host([2, 1152], "bf16").view([2, 576], [1152, 2])), `${Q} 'kv': expected stride 1 in the last dimension, got strides [1152, 2]`);
  rejects("stream not a Stream", () => quantizeKvCacheFp8(host([2, 576], "bf16"), any("default")), `${Q} 'stream': expected a Stream (Stream.create()) or undefined, got string default`);
  assert.deepEqual(quantizeKvCacheFp8(host([0, 576], "bf16")).shape, [0, 656]);
  // A row-strided view is quantized from its own rows.
  const rows = randomBf16(new Rng(5), 3 * 600, { std: 0.5 });
  const view = Tensor.fromHost(rows, [3, 600], "bf16").view([3, 576], [600, 1]);
  const expected = quantizeKvCacheV32(Uint16Array.from({ length: 3 * 576 }, (_, i) => rows[Math.floor(i / 576) * 600 + (i % 576)]));
  assert.deepEqual(quantizeKvCacheFp8(view).host, expected);
});

// ---------------------------------------------------------------------------------------------------
// mlaDecodeReferenceGpu

const R = "mlaDecodeReferenceGpu(): argument";

test("validateReferenceGpuArgs() names errors after mlaDecodeReferenceGpu, contiguity, outputs and s_q", () => {
  const ref = (over: Record<string, unknown>) => ({ ...dense(host, over), schedMeta: undefined }) as MlaDecodeReferenceGpuArgs;
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["q f32", { q: host([2, 2, 8, 576], "f32") }, `${R} 'q': expected dtype bf16 or fp16, got f32`],
    ["kCache for h_kv = 3", { kCache: host([4, 64, 3, 576], "bf16") }, `${R} 'kCache': expected h_kv >= 1 dividing h_q = 8, got h_kv = 3`],
    ["cacheSeqlens missing", { cacheSeqlens: undefined }, `${R} 'cacheSeqlens': expected an int32 tensor [b] (dense decode), got undefined`],
    ["q with padded heads", { q: host([2, 2, 8, 640], "bf16").view([2, 2, 8, 576], [2 * 8 * 640, 8 * 640, 640, 1]) }, `${R} 'q': expected a contiguous tensor (the fp32 reference reads it row-major), got strides [10240, 5120, 640, 1]`],
    ["kCache with padded blocks", { kCache: host([5 * 64 * 2 * 576], "bf16").view([4, 64, 2, 576], [5 * 64 * 2 * 576 / 4 + 8, 2 * 576, 576, 1]) }, `${R} 'kCache': expected a contiguous tensor (the fp32 reference reads it row-major), got strides [92168, 1152, 576, 1]`],
    ["blockTable a column slice", { blockTable: host([2, 6], "i32").view([2, 3], [6, 1]) }, `${R} 'blockTable': expected a contiguous tensor (the fp32 reference reads it row-major), got strides [6, 1]`],
    ["out given", { out: host([2, 2, 8, 512], "bf16") }, `${R} 'out': expected undefined (the fp32 reference returns new f32 out and lse), got a value`],
    ["lse given", { lse: host([2, 8, 2], "f32") }, `${R} 'lse': expected undefined (the fp32 reference returns new f32 out and lse), got a value`],
    ["s_q over the grid limit", { q: host([576], "bf16").view([2, 65536, 8, 576], [0, 0, 0, 1]), out: undefined }, `${R} 'q': expected s_q <= 65535 (a launch grid dimension), got s_q = 65536`],
  ];
  rejects("args null", () => validateReferenceGpuArgs(any(null), false), `${R} 'args': expected an options object, got null`);
  for (const [what, over, message] of cases) rejects(what, () => validateReferenceGpuArgs(ref(over), false), message);
  // The public function itself refuses host tensors before it needs a driver.
  rejects("host q", () => mlaDecodeReferenceGpu(ref({})), `${R} 'q': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`);
  assert.equal(validateReferenceGpuArgs(ref({ causal: true }), false).causal, true);
});

// ---------------------------------------------------------------------------------------------------
// flashMlaWithKvcache, sparse path (validateSparseArgs): what only a GPU call has

test("validateSparseArgs() on the GPU path names a stream or metadata of another device", () => {
  const sparse = (over: Record<string, unknown>) =>
    ({ q: cuda([2, 1, 64, 576], "bf16"), kCache: cuda([3, 64, 1, 656], "u8"), indices: cuda([2, 1, 128], "i32"), isFp8Kvcache: true, headDimV: 512, schedMeta: getMlaMetadata(), ...over }) as FlashMlaWithKvcacheArgs;
  const meta = new (class extends MlaSchedMeta {
    override get deviceOrdinal(): number {
      return 1;
    }
  })();
  rejects("stream not a Stream", () => validateSparseArgs(sparse({ stream: 0n })), `${D} 'stream': expected a Stream (Stream.create()) or undefined, got bigint 0`);
  rejects("stream on another GPU", () => validateSparseArgs(sparse({ stream: fakeStream(2) })), `${D} 'stream': expected a stream on q's device (cuda:0), got a stream on cuda:2`);
  rejects("schedMeta from another GPU", () => validateSparseArgs(sparse({ schedMeta: meta })), `${D} 'schedMeta': expected metadata filled on q's device (cuda:0), got metadata filled on cuda:1`);
  assert.equal(validateSparseArgs(sparse({ stream: fakeStream(0) })).topk, 128);
});
