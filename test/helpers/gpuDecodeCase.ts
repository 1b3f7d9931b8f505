import { makeGpuDenseCase } from "../../src/bench/makeGpuDenseCase.js";
import { flashMlaWithKvcache, type DenseKernelName } from "../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata, type MlaSchedMeta } from "../../src/mla/MlaSchedMeta.js";
import { Rng } from "../../src/numeric/random.js";
import { Stream } from "../../src/runtime/Stream.js";
import { Tensor } from "../../src/runtime/Tensor.js";
import { drawDenseLayout, type DenseCase, type DenseCaseOptions } from "./makeDecodeCase.js";

/** A dense case whose tensors live on the GPU. `host` is set when it was made on the host. */
export interface GpuDenseCase {
  q: Tensor;
  kCache: Tensor;
  blockTable: Tensor;
  cacheSeqlens: Tensor;
  causal: boolean;
  softmaxScale: number;
  headDimV: 512;
  seqlens: number[];
  blockTableHost: Int32Array;
  host?: DenseCase;
  dispose(): void;
}

export function uploadDenseCase(c: DenseCase): GpuDenseCase {
  const q = Tensor.toDevice(c.q);
  const kCache = Tensor.toDevice(c.kCache);
  const blockTable = Tensor.toDevice(c.blockTable);
  const cacheSeqlens = Tensor.toDevice(c.cacheSeqlens);
  return {
    q, kCache, blockTable, cacheSeqlens,
    causal: c.causal, softmaxScale: c.softmaxScale, headDimV: 512, seqlens: c.seqlens,
    blockTableHost: c.blockTable.host as Int32Array, host: c,
    dispose() { for (const t of [q, kCache, blockTable, cacheSeqlens]) t.dispose(); },
  };
}

let stream: Stream | undefined;

/**
 * The same kind of case as makeDenseCase (FlashMLA's data: N(0,1)/10 clamped to [-1, 1], permuted block
 * table, NaN in every slot no request owns) but drawn on the GPU by the benchmark's case builder:
 * FlashMLA's larger shapes hold billions of values. The lengths come from the host Rng as in
 * makeDenseCase; the case is ready (its stream synchronized) when this returns.
 */
export function makeDenseCaseGpu(opts: DenseCaseOptions): GpuDenseCase {
  const { seqlens } = drawDenseLayout(new Rng(opts.seed), opts);
  stream ??= Stream.create();
  const c = makeGpuDenseCase({ b: opts.b, s_q: opts.s_q, h_q: opts.h_q, h_kv: opts.h_kv, seqlens, causal: opts.causal, dtype: opts.dtype }, { seed: opts.seed, stream });
  return {
    q: c.q, kCache: c.kCache, blockTable: c.blockTable, cacheSeqlens: c.cacheSeqlens,
    causal: c.causal, softmaxScale: c.softmaxScale, headDimV: 512, seqlens: [...c.seqlens], blockTableHost: c.blockTableHost,
    dispose: () => c.dispose(),
  };
}

/**
 * One dense call on `c` with `kernel` and fresh metadata; the caller disposes out, lse and meta (meta is
 * disposed here if the call throws).
 */
export function runDenseKernel(c: GpuDenseCase, kernel: DenseKernelName, stream?: Stream): { out: Tensor; lse: Tensor; meta: MlaSchedMeta } {
  const meta = getMlaMetadata();
  try {
    const { out, lse } = flashMlaWithKvcache({ ...c, schedMeta: meta, stream, kernel });
    return { out, lse, meta };
  } catch (e) {
    meta.dispose();
    throw e;
  }
}
