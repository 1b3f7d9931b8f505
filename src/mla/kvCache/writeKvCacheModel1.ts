import { ArgumentError, formatGot, formatShape } from "../../errors/ArgumentError.js";
import { MODEL1_D_QK, MODEL1_TOKEN_BYTES, model1PageBytes } from "../../numeric/kvCacheModel1.js";
import type { Stream } from "../../runtime/Stream.js";
import type { Tensor } from "../../runtime/Tensor.js";
import { checkSameDevice, checkStream, checkTensor } from "../checkTensor.js";
import { launchKernel, loadKernel } from "../contract/kernelRegistry.js";
import { Model1KvWriteParamsStruct } from "../contract/params.js";

/** Tokens one CTA of the writer quantizes (a warp per token). */
const TOKENS_PER_CTA = 8;
const INT32_MAX = 2 ** 31 - 1;

export interface WriteKvCacheModel1Args {
  /** [num_tokens, 512] bf16 on the GPU: the new tokens (448 NoPE dims, then 64 RoPE); last dim contiguous, rows 16-B aligned. */
  kv: Tensor;
  /** [num_tokens] int32: physical slot block · page_block_size + offset per token; -1 (or any slot outside the cache) skips it. */
  slotMapping: Tensor;
  /**
   * [num_blocks, page_block_size, 1, 584] u8 or fp8_e4m3: the MODEL1 cache as FlashMLA takes it, strides
   * (S, 584, 584, 1) with S = model1PageBytes(page_block_size) (any block stride >= page_block_size · 584
   * that is a multiple of 16 works); data 16-B aligned. Rows of this view are not tokens: a page holds its
   * tokens' 576 data bytes first and their 8-byte scale records after them.
   */
  cache: Tensor;
  /** Tokens per page: when given, must equal cache.shape[1]. @default cache.shape[1] */
  pageBlockSize?: number;
  stream?: Stream;
}

/** What {@link validateWriteKvCacheModel1Args} returns: the checked tensors and the page geometry. */
export interface CheckedWriteKvCacheModel1Args {
  kv: Tensor;
  slots: Tensor;
  cache: Tensor;
  pageBlockSize: number;
  /** Bytes from one page to the next (model1PageBytes for a single-page cache). */
  blockStrideBytes: number;
}

/**
 * Checks the arguments of {@link writeKvCacheModel1} and returns them. `requireCuda = false` checks
 * everything but residency (and the device address), so host tensors can stand in. Exported for tests.
 */
export function validateWriteKvCacheModel1Args(args: WriteKvCacheModel1Args, requireCuda = true): CheckedWriteKvCacheModel1Args {
  const fn = "writeKvCacheModel1";
  if (args === null || typeof args !== "object") throw new ArgumentError(fn, "args", "an options object", formatGot(args));
  const device = requireCuda ? ("cuda" as const) : undefined;
  const wantPbs = args.pageBlockSize;
  if (wantPbs !== undefined && (!Number.isSafeInteger(wantPbs) || wantPbs < 1)) {
    throw new ArgumentError(fn, "pageBlockSize", "an integer >= 1 (tokens per page) or undefined", formatGot(wantPbs));
  }
  const kv = checkTensor(fn, "kv", args.kv, { dtypes: ["bf16"], shape: [undefined, MODEL1_D_QK], dims: ["num_tokens", "d_qk"], lastDimContiguous: true, alignBytes: 16, device });
  const n = kv.shape[0];
  const slots = checkTensor(fn, "slotMapping", args.slotMapping, { dtypes: ["i32"], shape: [n], dims: ["num_tokens"], contiguous: true, device });
  const cache = checkTensor(fn, "cache", args.cache, {
    dtypes: ["u8", "fp8_e4m3"],
    shape: [undefined, wantPbs, 1, MODEL1_TOKEN_BYTES],
    dims: ["num_blocks", "page_block_size", "h_kv", "token_bytes"],
    lastDimContiguous: true,
    device,
  });
  const [numBlocks, pbs] = cache.shape;
  if (pbs < 1) throw new ArgumentError(fn, "cache", "page_block_size >= 1", `${pbs} (shape ${formatShape(cache.shape)})`);
  if (pbs > 1 && cache.strides[1] !== MODEL1_TOKEN_BYTES) throw new ArgumentError(fn, "cache", `a token stride of ${MODEL1_TOKEN_BYTES} bytes`, `${cache.strides[1]}`);
  const blockStrideBytes = numBlocks > 1 ? cache.strides[0] : model1PageBytes(pbs);
  if (blockStrideBytes < pbs * MODEL1_TOKEN_BYTES || blockStrideBytes % 16 !== 0) {
    throw new ArgumentError(fn, "cache", `a block stride that is a multiple of 16 bytes and at least page_block_size · ${MODEL1_TOKEN_BYTES} = ${pbs * MODEL1_TOKEN_BYTES} (model1PageBytes(${pbs}) = ${model1PageBytes(pbs)})`, `${blockStrideBytes}`);
  }
  if (numBlocks * pbs > INT32_MAX) throw new ArgumentError(fn, "cache", `at most ${INT32_MAX} slots (int32 slot ids)`, `${numBlocks} · ${pbs} = ${numBlocks * pbs}`);
  if (cache.isCuda && cache.ptr % 16n !== 0n) throw new ArgumentError(fn, "cache", "data aligned to 16 bytes", `address 0x${cache.ptr.toString(16)}`);
  checkSameDevice(fn, { kv, slotMapping: slots, cache });
  checkStream(fn, args.stream, { name: "kv", tensor: kv });
  return { kv, slots, cache, pageBlockSize: pbs, blockStrideBytes };
}

/**
 * Quantizes bf16 tokens into DeepSeek-V4's MODEL1 FP8 KV cache at the given slots, on the GPU: per token
 * 448 e4m3 NoPE codes with 7 power-of-two e8m0 scales and 64 bf16 RoPE values, in FlashMLA's page
 * layout. Bit-identical to quantizeKvCacheModel1 on the CPU for every token it writes. It writes each
 * token's 576 data bytes and its 8-byte scale record (pad byte 0) and nothing else: a page's padding and
 * the slots no token goes to keep their bytes (allocate and clear pages before use). Slots outside
 * [0, num_blocks · page_block_size) (-1 by convention) are skipped; two tokens given one slot race.
 * @example writeKvCacheModel1({ kv, slotMapping, cache: flat.view([numBlocks, 64, 1, 584], [37440, 584, 584, 1]) })
 */
export function writeKvCacheModel1(args: WriteKvCacheModel1Args): void {
  const { kv, slots, cache, pageBlockSize, blockStrideBytes } = validateWriteKvCacheModel1Args(args);
  const n = kv.shape[0];
  if (n === 0) return;
  const params = Model1KvWriteParamsStruct.pack({
    kv: kv.ptr,
    slot_mapping: slots.ptr,
    cache: cache.ptr,
    kv_stride: BigInt(kv.strides[0]),
    cache_block_stride: BigInt(blockStrideBytes),
    num_tokens: n,
    page_block_size: pageBlockSize,
    num_slots: cache.shape[0] * pageBlockSize,
    pad0: 0,
  });
  launchKernel(loadKernel(kv.deviceOrdinal, "fp8_kv_write_model1"), Math.ceil(n / TOKENS_PER_CTA), params, { stream: args.stream });
}
