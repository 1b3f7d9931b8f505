import { ArgumentError } from "../errors/ArgumentError.js";
import { DENSE_PAGE_BLOCK_SIZE as PAGE, D_V } from "../mla/contract/shape.js";
import { decodeWithOverrides, type DecodeOverrides } from "../mla/flashMlaWithKvcache.js";
import { getMlaMetadata, type MlaSchedMeta } from "../mla/sched/MlaSchedMeta.js";
import { Rng } from "../numeric/random.js";
import type { DeviceBuffer } from "../runtime/DeviceBuffer.js";
import { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { denseCaseDqk, drawDenseLayout, UNUSED_BLOCK_ID, type DenseCase, type DenseCaseOptions } from "./denseCase.js";
import { testFillKernels } from "./testFillKernels.js";

/** Two quiet NaNs (0x7fc0 is NaN in both bf16 and fp16): poison for every slot no request owns. */
const NAN_HALF_PAIR = 0x7fc07fc0;

/** The shape and lengths of one dense decode case. */
export interface DenseCaseSpec {
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  /** Cache length of each request (b entries, each ≥ 0). */
  seqlens: readonly number[];
  causal: boolean;
  dtype: "bf16" | "fp16";
  /** Dims of q and of each cached row: 576, or DeepSeek-V4's 512 (V the whole row). @default 576 */
  d_qk?: number;
}

/** A dense case whose tensors live on the GPU: spread it into flashMlaWithKvcache's arguments. */
export interface GpuDenseCase {
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  seqlens: number[];
  causal: boolean;
  dtype: "bf16" | "fp16";
  /** q's and each cached row's dims: 576 or 512. */
  d_qk: number;
  /** [b, s_q, h_q, d_qk] */
  q: Tensor;
  /** [num_blocks, 64, h_kv, d_qk]: values in every owned slot, NaN elsewhere. */
  kCache: Tensor;
  /** [b, max_blocks] i32: a random permutation of the blocks; unused entries 2147480000. */
  blockTable: Tensor;
  /** [b] i32 */
  cacheSeqlens: Tensor;
  /** The block table as it was uploaded. */
  blockTableHost: Int32Array;
  maxBlocks: number;
  numBlocks: number;
  softmaxScale: number;
  headDimV: typeof D_V;
  /** Device bytes of q and the cache: what one call must read. */
  inputBytes: number;
  /** The host case it was uploaded from, when it was made on the host. */
  host?: DenseCase;
  /** Frees every tensor; safe to call twice. */
  dispose(): void;
}

/**
 * Builds a dense decode case on the GPU with FlashMLA's test data (FLASHMLA.md §4) but drawn there,
 * so cases of gigabytes cost milliseconds: q and the owned cache slots ~ N(0,1)/10 clamped to
 * [-1, 1] (bench_fill.cu, a counter-based hash of seed and element index), every other slot NaN, and
 * a seeded random permutation of the physical blocks; rows of 576 dims, or DeepSeek-V4's 512. Work is queued on `stream`; the case is ready
 * when the stream is.
 */
export function makeGpuDenseCase(spec: DenseCaseSpec, opts: { seed: number; stream: Stream }): GpuDenseCase {
  const fn = "makeGpuDenseCase";
  const { b, s_q, h_q, h_kv, causal, dtype } = spec;
  for (const [name, v] of [["b", b], ["s_q", s_q], ["h_q", h_q], ["h_kv", h_kv]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new ArgumentError(fn, `spec.${name}`, "an integer >= 1", String(v));
  }
  if (h_q % h_kv !== 0) throw new ArgumentError(fn, "spec.h_kv", `a divisor of h_q (${h_q})`, String(h_kv));
  if (spec.seqlens.length !== b || spec.seqlens.some((n) => !Number.isInteger(n) || n < 0)) {
    throw new ArgumentError(fn, "spec.seqlens", `${b} integers >= 0`, JSON.stringify(spec.seqlens));
  }
  if (dtype !== "bf16" && dtype !== "fp16") throw new ArgumentError(fn, "spec.dtype", '"bf16" or "fp16"', String(dtype));
  const d_qk = denseCaseDqk(fn, spec.d_qk);
  const { seed, stream } = opts;
  const ordinal = stream.deviceOrdinal;
  const k = testFillKernels(ordinal);
  const rng = new Rng(seed);

  const blocksOf = spec.seqlens.map((len) => Math.ceil(len / PAGE));
  const maxBlocks = Math.max(1, ...blocksOf);
  // One spare block nobody owns, so an all-poison block always exists.
  const numBlocks = blocksOf.reduce((a, n) => a + n, 0) + 1;
  const physical = rng.permutation(numBlocks);
  const blockTableHost = new Int32Array(b * maxBlocks).fill(UNUSED_BLOCK_ID); // [b, max_blocks]
  let next = 0;
  for (let i = 0; i < b; i++) {
    for (let j = 0; j < blocksOf[i]; j++) blockTableHost[i * maxBlocks + j] = physical[next++];
  }
  const seqlensHost = Int32Array.from(spec.seqlens);

  const owned: Tensor[] = [];
  const keep = (t: Tensor) => (owned.push(t), t);
  try {
    const q = keep(Tensor.emptyDevice([b, s_q, h_q, d_qk], dtype, ordinal));
    const kCache = keep(Tensor.emptyDevice([numBlocks, PAGE, h_kv, d_qk], dtype, ordinal));
    const blockTable = keep(Tensor.emptyDevice([b, maxBlocks], "i32", ordinal));
    const cacheSeqlens = keep(Tensor.emptyDevice([b], "i32", ordinal));
    bufferOf(blockTable).copyFromHost(blockTableHost, 0, stream);
    bufferOf(cacheSeqlens).copyFromHost(seqlensHost, 0, stream);
    bufferOf(kCache).memset32(NAN_HALF_PAIR, 0, undefined, stream);

    const isFp16 = dtype === "fp16" ? 1 : 0;
    // Seeds for q and the cache differ, and both depend on the case seed only.
    const qSeed = BigInt(rng.nextU32()) * 0x100000000n + BigInt(rng.nextU32());
    const kSeed = BigInt(rng.nextU32()) * 0x100000000n + BigInt(rng.nextU32());
    // Grid-stride: any grid covers every element; 1024 blocks fill any Hopper GPU.
    k.fillNormalHalf.launch({ grid: 1024, block: 256, stream }, [
      { kind: "ptr", value: q.ptr },
      { kind: "u64", value: BigInt(q.numel) },
      { kind: "u64", value: qSeed },
      { kind: "f32", value: 0.1 },
      { kind: "f32", value: 1 },
      { kind: "i32", value: isFp16 },
    ]);
    const maxLen = Math.max(0, ...spec.seqlens);
    if (maxLen > 0) {
      k.fillKvUsedSlots.launch({ grid: [Math.min(maxLen, 4096), b, 1], block: 256, stream }, [
        { kind: "ptr", value: kCache.ptr },
        { kind: "ptr", value: blockTable.ptr },
        { kind: "ptr", value: cacheSeqlens.ptr },
        { kind: "i32", value: maxBlocks },
        { kind: "i32", value: h_kv },
        { kind: "i32", value: d_qk },
        { kind: "u64", value: kSeed },
        { kind: "f32", value: 0.1 },
        { kind: "f32", value: 1 },
        { kind: "i32", value: isFp16 },
      ]);
    }
    // The host arrays above must outlive the async copies.
    stream.synchronize();
    return {
      b, s_q, h_q, h_kv, causal, dtype, d_qk,
      seqlens: [...spec.seqlens],
      q, kCache, blockTable, cacheSeqlens, blockTableHost, maxBlocks, numBlocks,
      softmaxScale: 1 / Math.sqrt(d_qk),
      headDimV: D_V,
      inputBytes: (q.numel + kCache.numel) * q.elementSize,
      dispose: disposeOnce(owned),
    };
  } catch (e) {
    for (const t of owned) t.dispose();
    throw e;
  }
}

let defaultStream: Stream | undefined;

/**
 * The same kind of case as makeDenseCase (FlashMLA's data: N(0,1)/10 clamped to [-1, 1], permuted block
 * table, NaN in every slot no request owns) drawn on the GPU by makeGpuDenseCase: FlashMLA's larger
 * shapes hold billions of values. The lengths come from the host Rng as in makeDenseCase; the case is
 * ready (its stream synchronized) when this returns.
 */
export function makeDenseCaseGpu(opts: DenseCaseOptions): GpuDenseCase {
  const { seqlens } = drawDenseLayout(new Rng(opts.seed), opts);
  defaultStream ??= Stream.create();
  return makeGpuDenseCase({ b: opts.b, s_q: opts.s_q, h_q: opts.h_q, h_kv: opts.h_kv, seqlens, causal: opts.causal, dtype: opts.dtype, d_qk: opts.d_qk }, { seed: opts.seed, stream: defaultStream });
}

/** A host case's tensors copied to the GPU (device 0), with the host case kept for the reference. */
export function uploadDenseCase(c: DenseCase): GpuDenseCase {
  const owned: Tensor[] = [];
  const up = (t: Tensor) => {
    const d = Tensor.toDevice(t);
    owned.push(d);
    return d;
  };
  try {
    const [b, s_q, h_q, d_qk] = c.q.shape;
    const [numBlocks, , h_kv] = c.kCache.shape;
    const q = up(c.q), kCache = up(c.kCache), blockTable = up(c.blockTable), cacheSeqlens = up(c.cacheSeqlens);
    return {
      b, s_q, h_q, h_kv, causal: c.causal, dtype: c.q.dtype === "fp16" ? "fp16" : "bf16", d_qk,
      seqlens: c.seqlens,
      q, kCache, blockTable, cacheSeqlens,
      blockTableHost: c.blockTable.host as Int32Array,
      maxBlocks: c.blockTable.shape[1],
      numBlocks,
      softmaxScale: c.softmaxScale,
      headDimV: D_V,
      inputBytes: (q.numel + kCache.numel) * q.elementSize,
      host: c,
      dispose: disposeOnce(owned),
    };
  } catch (e) {
    for (const t of owned) t.dispose();
    throw e;
  }
}

function disposeOnce(tensors: readonly Tensor[]): () => void {
  let disposed = false;
  return () => {
    if (disposed) return;
    disposed = true;
    for (const t of tensors) t.dispose();
  };
}

function bufferOf(t: Tensor): DeviceBuffer {
  if (t.buffer === undefined) throw new Error("a device tensor without device storage");
  return t.buffer;
}

/**
 * One dense call on `c` with fresh metadata (flashMlaWithKvcache's choice of kernel, or `overrides`
 * forced); the caller disposes out, lse and meta (meta is disposed here if the call throws).
 */
export function decodeDenseCase(c: GpuDenseCase, overrides: DecodeOverrides = {}, stream?: Stream): { out: Tensor; lse: Tensor; meta: MlaSchedMeta } {
  const meta = getMlaMetadata();
  try {
    const { out, lse } = decodeWithOverrides({ ...c, schedMeta: meta, stream }, overrides);
    return { out, lse, meta };
  } catch (e) {
    meta.dispose();
    throw e;
  }
}
