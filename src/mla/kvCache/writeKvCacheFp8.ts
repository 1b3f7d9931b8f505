import { ArgumentError, formatGot } from "../../errors/ArgumentError.js";
import { FP8_TOKEN_BYTES, quantizeKvCacheV32 } from "../../numeric/kvCacheFp8.js";
import { Device } from "../../runtime/Device.js";
import type { Stream } from "../../runtime/Stream.js";
import { Tensor } from "../../runtime/Tensor.js";
import { checkSameDevice, checkStream, checkTensor } from "../checkTensor.js";
import { launchKernel, loadKernel } from "../contract/kernelRegistry.js";
import { Fp8KvWriteParamsStruct } from "../contract/params.js";
import { D_QK } from "../contract/shape.js";

/** Tokens one CTA of the writer quantizes (a warp per token). */
const TOKENS_PER_CTA = 8;

export interface WriteKvCacheFp8Args {
  /** [num_tokens, 576] bf16 on the GPU: the new latent tokens; last dim contiguous, rows 16-B aligned. */
  kv: Tensor;
  /** [num_tokens] int32: physical slot block * page_block_size + offset per token; -1 (or any slot outside the cache) skips it. */
  slotMapping: Tensor;
  /** [num_blocks, page_block_size, 1, 656] u8 or fp8_e4m3: the V32 FP8 cache; token stride 656 B, block stride a multiple of 16 B. */
  kCache: Tensor;
  stream?: Stream;
}

/**
 * Checks the arguments of {@link writeKvCacheFp8} and returns them. `requireCuda = false` checks
 * everything but residency (and the device address), so host tensors can stand in. Exported for tests.
 */
export function validateWriteKvCacheFp8Args(args: WriteKvCacheFp8Args, requireCuda = true): { kv: Tensor; slots: Tensor; cache: Tensor } {
  const fn = "writeKvCacheFp8";
  if (args === null || typeof args !== "object") throw new ArgumentError(fn, "args", "an options object", formatGot(args));
  const device = requireCuda ? ("cuda" as const) : undefined;
  const kv = checkTensor(fn, "kv", args.kv, { dtypes: ["bf16"], shape: [undefined, D_QK], dims: ["num_tokens", "d_qk"], lastDimContiguous: true, alignBytes: 16, device });
  const n = kv.shape[0];
  const slots = checkTensor(fn, "slotMapping", args.slotMapping, { dtypes: ["i32"], shape: [n], dims: ["num_tokens"], contiguous: true, device });
  const cache = checkTensor(fn, "kCache", args.kCache, { dtypes: ["u8", "fp8_e4m3"], shape: [undefined, undefined, 1, FP8_TOKEN_BYTES], dims: ["num_blocks", "page_block_size", "h_kv", "token_bytes"], lastDimContiguous: true, device });
  if (cache.shape[1] > 1 && cache.strides[1] !== FP8_TOKEN_BYTES) throw new ArgumentError(fn, "kCache", `a token stride of ${FP8_TOKEN_BYTES} bytes`, `${cache.strides[1]}`);
  if (cache.shape[0] > 1 && cache.strides[0] % 16 !== 0) throw new ArgumentError(fn, "kCache", "a block stride that is a multiple of 16 bytes", `${cache.strides[0]}`);
  if (cache.isCuda && cache.ptr % 16n !== 0n) throw new ArgumentError(fn, "kCache", "data aligned to 16 bytes", `address 0x${cache.ptr.toString(16)}`);
  checkSameDevice(fn, { kv, slotMapping: slots, kCache: cache });
  checkStream(fn, args.stream, { name: "kv", tensor: kv });
  return { kv, slots, cache };
}

/**
 * Quantizes bf16 latent tokens into the V32 FP8 KV cache (656 bytes per token: 512 e4m3, 4 f32 tile
 * scales, 64 bf16 RoPE) at the given slots, on the GPU. Bit-identical to quantizeKvCacheV32 on the CPU.
 * Slots outside [0, num_blocks * page_block_size) (-1 by convention) are skipped: nothing is written
 * outside the cache.
 */
export function writeKvCacheFp8(args: WriteKvCacheFp8Args): void {
  const { kv, slots, cache } = validateWriteKvCacheFp8Args(args);
  const n = kv.shape[0];
  if (n === 0) return;
  const params = Fp8KvWriteParamsStruct.pack({
    kv: kv.ptr,
    slot_mapping: slots.ptr,
    cache: cache.ptr,
    kv_stride: BigInt(kv.strides[0]),
    cache_block_stride: BigInt(cache.shape[0] > 1 ? cache.strides[0] : cache.shape[1] * FP8_TOKEN_BYTES),
    num_tokens: n,
    page_block_size: cache.shape[1],
    num_slots: cache.shape[0] * cache.shape[1],
    pad0: 0,
  });
  launchKernel(loadKernel(kv.deviceOrdinal, "fp8_kv_write"), Math.ceil(n / TOKENS_PER_CTA), params, { stream: args.stream });
}

/**
 * Quantizes [num_tokens, 576] bf16 tokens to [num_tokens, 656] V32 FP8 bytes: on the GPU for a CUDA
 * tensor (through writeKvCacheFp8), on the CPU for a host tensor. Both give the same bytes.
 */
export function quantizeKvCacheFp8(kv: Tensor, stream?: Stream): Tensor<"u8"> {
  const fn = "quantizeKvCacheFp8";
  checkTensor(fn, "kv", kv, { dtypes: ["bf16"], shape: [undefined, D_QK], dims: ["num_tokens", "d_qk"], lastDimContiguous: true });
  checkStream(fn, stream);
  const n = kv.shape[0];
  if (!kv.isCuda) {
    const host = kv.contiguousHost();
    return Tensor.fromHost(quantizeKvCacheV32(host.host as Uint16Array), [n, FP8_TOKEN_BYTES], "u8");
  }
  const ordinal = kv.deviceOrdinal;
  const out = Tensor.emptyDevice([n, 1, 1, FP8_TOKEN_BYTES], "u8", ordinal);
  const slots = Tensor.toDevice(Tensor.fromHost(Int32Array.from({ length: n }, (_, i) => i), [n], "i32"), ordinal);
  try {
    writeKvCacheFp8({ kv, slotMapping: slots, kCache: out, stream });
  } catch (e) {
    out.dispose();
    throw e;
  } finally {
    // The slot tensor must outlive the kernel that reads it.
    if (stream) stream.synchronize();
    else Device.get(ordinal).synchronize();
    slots.dispose();
  }
  return out.reshape([n, FP8_TOKEN_BYTES]);
}
