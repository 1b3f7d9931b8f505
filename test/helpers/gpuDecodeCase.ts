import { Module } from "../../src/runtime/Module.js";
import { Tensor } from "../../src/runtime/Tensor.js";
import { Rng } from "../../src/numeric/random.js";
import { drawDenseLayout, NAN_HALF_BITS, type DenseCase, type DenseCaseOptions } from "./makeDecodeCase.js";

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

let fillModule: Module | undefined;
function fill(): Module {
  fillModule ??= Module.load("test_fill");
  return fillModule;
}

/**
 * The same kind of case as makeDenseCase (FlashMLA's data: N(0,1)/10 clamped to [-1, 1], permuted block
 * table, NaN in every slot no request owns) but with q and the cache drawn on the GPU: FlashMLA's larger
 * shapes hold billions of values. Lengths and block table come from the host Rng as in makeDenseCase.
 */
export function makeDenseCaseGpu(opts: DenseCaseOptions): GpuDenseCase {
  const { seed, b, s_q, h_q, h_kv, causal, dtype } = opts;
  const rng = new Rng(seed);
  const layout = drawDenseLayout(rng, opts);
  const isFp16 = dtype === "fp16" ? 1 : 0;
  const q = Tensor.emptyDevice([b, s_q, h_q, 576], dtype);
  const kCache = Tensor.emptyDevice([layout.num_blocks, 64, h_kv, 576], dtype);
  const blockTable = Tensor.toDevice(Tensor.fromHost(layout.block_table, [b, layout.max_blocks], "i32"));
  const cacheSeqlens = Tensor.toDevice(Tensor.fromHost(Int32Array.from(layout.seqlens), [b], "i32"));
  const m = fill();
  m.getFunction("fill_normal_half").launch({ grid: 1024, block: 256 }, [
    { kind: "ptr", value: q.ptr }, { kind: "u64", value: BigInt(q.numel) }, { kind: "u64", value: BigInt(seed * 2 + 1) },
    { kind: "f32", value: 0.1 }, { kind: "f32", value: 1 }, { kind: "i32", value: isFp16 },
  ]);
  kCache.buffer!.memset32((NAN_HALF_BITS << 16) | NAN_HALF_BITS);
  const maxLen = Math.max(1, ...layout.seqlens);
  m.getFunction("fill_kv_used_slots").launch({ grid: [Math.min(maxLen, 2048), b, 1], block: 256 }, [
    { kind: "ptr", value: kCache.ptr }, { kind: "ptr", value: blockTable.ptr }, { kind: "ptr", value: cacheSeqlens.ptr },
    { kind: "i32", value: layout.max_blocks }, { kind: "i32", value: h_kv }, { kind: "u64", value: BigInt(seed * 2 + 2) },
    { kind: "f32", value: 0.1 }, { kind: "f32", value: 1 }, { kind: "i32", value: isFp16 },
  ]);
  return {
    q, kCache, blockTable, cacheSeqlens, causal,
    softmaxScale: 1 / Math.sqrt(576), headDimV: 512, seqlens: layout.seqlens, blockTableHost: layout.block_table,
    dispose() { for (const t of [q, kCache, blockTable, cacheSeqlens]) t.dispose(); },
  };
}
