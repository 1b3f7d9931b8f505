import { test } from "node:test";
import assert from "node:assert/strict";
import { DENSE_FORMS, type DenseForm } from "../../../src/mla/dense/chooseDenseKernel.js";
import { decodeWithOverrides } from "../../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { mlaDecodeReference, type MlaDecodeReferenceArgs, type ReferenceRow } from "../../../src/mla/reference/mlaDecodeReference.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { DENSE_LSE_TOL, DENSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { fp16ArrayToF32 } from "../../../src/numeric/fp16.js";
import { Rng } from "../../../src/numeric/random.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { assertDecodeClose } from "../../helpers/compareDecode.js";
import { describeGpu } from "../../helpers/gpu.js";
import { padded, uploadStorage } from "../../helpers/strided.js";
import { DENSE_PAGE_BLOCK_SIZE, D_QK, D_V } from "../../../src/mla/contract/shape.js";
import { makeDenseCase, NAN_HALF_BITS, UNUSED_BLOCK_ID } from "../../../src/testing/denseCase.js";

// Seeded random dense decode configurations against the float64 CPU reference: shapes, head pairs,
// lengths (0, 1, around multiples of 64, long), causal masks shorter than s_q, fp16/bf16, every dense
// kernel, strided q and padded KV blocks, block tables wider than needed with poison ids in every
// unused entry, NaN in every cache slot no request owns, streams and preallocated outputs.
// Every failure names its seed: FLASHMLA_FUZZ_SEED=<seed> reruns just that case.
// FLASHMLA_FUZZ_CASES sets the number of cases (default 500).

const CASES = Number(process.env.FLASHMLA_FUZZ_CASES ?? "500");
const ONLY_SEED = process.env.FLASHMLA_FUZZ_SEED === undefined ? undefined : Number(process.env.FLASHMLA_FUZZ_SEED);
const FIRST_SEED = 700_000;
/** Tokens × KV heads per case: bounds the host-side case generation. */
const MAX_TOKEN_HEADS = 12_000;
/** Multiply-adds the float64 reference may spend per case before it samples rows. */
const REFERENCE_BUDGET = 60e6;

/** One fuzz configuration, fully determined by its seed. */
interface FuzzCase {
  seed: number;
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  lens: number[];
  causal: boolean;
  dtype: "bf16" | "fp16";
  /** A forced form, or undefined for the API's choice. */
  denseForm: DenseForm | undefined;
  softmaxScale: number | undefined;
  extraBlocks: number;
  /** Table columns beyond the longest request, all poison. */
  extraColumns: number;
  /** Elements of padding after each q head (a strided q), 0 for contiguous. */
  qPad: number;
  /** Token rows of padding after each KV block (a larger block stride), 0 for none. */
  blockPad: number;
  useStream: boolean;
  preallocate: boolean;
}

function drawLength(rng: Rng): number {
  const u = rng.uniform();
  if (u < 0.1) return 0;
  if (u < 0.3) return rng.pick([1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 193]);
  if (u < 0.7) return rng.int(1, 700);
  if (u < 0.95) return rng.int(700, 3000);
  return rng.int(3000, 9000);
}

function drawCase(seed: number): FuzzCase {
  const rng = new Rng(seed);
  const h_kv = rng.pick([1, 1, 1, 1, 2, 3, 4, 8]);
  const perKv = [1, 2, 3, 7, 8, 16, 21, 32, 42, 63, 64, 128].filter((k) => k * h_kv <= 128);
  const h_q = h_kv * rng.pick(perKv);
  const b = rng.uniform() < 0.5 ? rng.int(1, 4) : rng.int(4, 17);
  const s_q = rng.pick([1, 1, 2, 2, 3, 4, 6]);
  const lens = Array.from({ length: b }, () => drawLength(rng));
  while (lens.reduce((a, n) => a + n, 0) * h_kv > MAX_TOKEN_HEADS) {
    const i = lens.indexOf(Math.max(...lens));
    lens[i] = Math.floor(lens[i] / 2);
  }
  return {
    seed, b, s_q, h_q, h_kv, lens,
    causal: rng.uniform() < 0.5,
    dtype: rng.uniform() < 0.25 ? "fp16" : "bf16",
    denseForm: rng.uniform() < 0.5 ? undefined : rng.pick(DENSE_FORMS),
    softmaxScale: rng.uniform() < 0.2 ? rng.pick([0.01, 0.2]) : undefined,
    extraBlocks: rng.int(0, 4),
    extraColumns: rng.int(0, 3),
    qPad: rng.uniform() < 0.2 ? rng.pick([8, 64]) : 0,
    blockPad: rng.uniform() < 0.2 ? rng.pick([1, 3]) : 0,
    useStream: rng.uniform() < 0.3,
    preallocate: rng.uniform() < 0.3,
  };
}

function describeCase(f: FuzzCase): string {
  const lens = f.lens.length > 8 ? `${f.lens.slice(0, 8).join(",")},… (${f.lens.length})` : f.lens.join(",");
  return `b=${f.b} s_q=${f.s_q} h_q=${f.h_q} h_kv=${f.h_kv} lens=${lens} causal=${f.causal} ${f.dtype} form=${f.denseForm ?? "API"}` +
    `${f.softmaxScale ? ` scale=${f.softmaxScale}` : ""} extraBlocks=${f.extraBlocks} extraColumns=${f.extraColumns} qPad=${f.qPad} blockPad=${f.blockPad}` +
    `${f.useStream ? " stream" : ""}${f.preallocate ? " preallocated" : ""}`;
}

/** The host arguments (the reference's) and their GPU copies, strided the same way. */
interface Built {
  host: MlaDecodeReferenceArgs;
  gpu: { q: Tensor; kCache: Tensor; blockTable: Tensor; cacheSeqlens: Tensor };
  dispose(): void;
}

function build(f: FuzzCase): Built {
  const c = makeDenseCase({ seed: f.seed, b: f.b, s_q: f.s_q, h_q: f.h_q, h_kv: f.h_kv, seqlens: f.lens, causal: f.causal, dtype: f.dtype, extraBlocks: f.extraBlocks });
  const rng = new Rng(f.seed + 1);
  const num_blocks = c.kCache.shape[0];
  const used = f.lens.map((n) => Math.ceil(n / 64));
  const width = c.blockTable.shape[1] + f.extraColumns;
  const poison = [UNUSED_BLOCK_ID, -1, -77, num_blocks, num_blocks + 1000, 2 ** 31 - 1, -(2 ** 31)];
  const old = c.blockTable.host as Int32Array;
  const blockTable = new Int32Array(f.b * width);
  for (let i = 0; i < f.b; i++) {
    for (let k = 0; k < width; k++) blockTable[i * width + k] = k < used[i] ? old[i * c.blockTable.shape[1] + k] : rng.pick(poison);
  }
  const [b, s_q, h_q] = c.q.shape;
  const q = f.qPad === 0 ? c.q : padded(c.q, D_QK, f.qPad, [s_q * h_q * (D_QK + f.qPad), h_q * (D_QK + f.qPad), D_QK + f.qPad, 1], NAN_HALF_BITS);
  const blockElems = DENSE_PAGE_BLOCK_SIZE * f.h_kv * D_QK;
  const padElems = f.blockPad * f.h_kv * D_QK;
  const kCache = f.blockPad === 0 ? c.kCache : padded(c.kCache, blockElems, padElems, [blockElems + padElems, f.h_kv * D_QK, D_QK, 1], NAN_HALF_BITS);
  const host: MlaDecodeReferenceArgs = {
    q, kCache, blockTable: Tensor.fromHost(blockTable, [b, width], "i32"), cacheSeqlens: c.cacheSeqlens,
    headDimV: 512, causal: f.causal, softmaxScale: f.softmaxScale,
  };
  const gpu = {
    q: uploadStorage(q),
    kCache: uploadStorage(kCache),
    blockTable: Tensor.toDevice(host.blockTable!),
    cacheSeqlens: Tensor.toDevice(c.cacheSeqlens),
  };
  return { host, gpu, dispose: () => [gpu.q, gpu.kCache, gpu.blockTable, gpu.cacheSeqlens].forEach((t) => t.dispose()) };
}

/** All rows when the reference can afford them, else a seeded sample that always holds the corner rows. */
function rowsToCheck(f: FuzzCase): ReferenceRow[] | undefined {
  const cost = f.s_q * f.h_q * f.lens.reduce((a, n) => a + n, 0) * D_QK * 2;
  if (cost <= REFERENCE_BUDGET) return undefined;
  const rng = new Rng(f.seed + 2);
  const count = Math.min(64, Math.max(8, Math.floor(REFERENCE_BUDGET / (Math.max(...f.lens) * D_QK * 2))));
  const rows: ReferenceRow[] = [{ batch: 0, token: 0, head: 0 }, { batch: f.b - 1, token: f.s_q - 1, head: f.h_q - 1 }];
  while (rows.length < count) rows.push({ batch: rng.int(0, f.b), token: rng.int(0, f.s_q), head: rng.int(0, f.h_q) });
  return rows;
}

/** Runs one case and compares it with the reference; throws on a mismatch. Returns whether rows were sampled. */
function runCase(f: FuzzCase, stream: Stream): boolean {
  const built = build(f);
  const meta = getMlaMetadata();
  const outs: Tensor[] = [];
  try {
    const s = f.useStream ? stream : undefined;
    const pre: { out?: Tensor; lse?: Tensor } = {};
    if (f.preallocate) {
      outs.push((pre.out = Tensor.emptyDevice([f.b, f.s_q, f.h_q, D_V], f.dtype)));
      outs.push((pre.lse = Tensor.emptyDevice([f.b, f.h_q, f.s_q], "f32")));
    }
    const { out, lse } = decodeWithOverrides({ ...built.gpu, headDimV: D_V, schedMeta: meta, causal: f.causal, softmaxScale: f.softmaxScale, stream: s, ...pre }, { denseForm: f.denseForm });
    if (!pre.out) outs.push(out, lse);
    const bits = out.toHost(s).host as Uint16Array;
    const gotOut = f.dtype === "fp16" ? fp16ArrayToF32(bits) : bf16ArrayToF32(bits);
    const gotLse = lse.toHost(s).host as Float32Array;
    // A valid configuration (poison ids only in entries no request uses) must leave no device error.
    meta.checkErrors(s);

    const rows = rowsToCheck(f);
    const ref = mlaDecodeReference(built.host, { rows });
    return assertDecodeClose({ out: gotOut, lse: gotLse }, { out: ref.outF32, lse: ref.lse.host as Float32Array }, f, rows, { out: DENSE_OUT_TOL, lse: DENSE_LSE_TOL }, f.dtype);
  } finally {
    if (f.useStream) stream.synchronize();
    for (const t of outs) t.dispose();
    meta.dispose();
    built.dispose();
  }
}

describeGpu("fuzz: seeded random dense decode configurations against the CPU reference", () => {
  test(`${ONLY_SEED === undefined ? CASES : 1} random configurations match the float64 reference; each failure names its seed`, (t) => {
    const seeds = ONLY_SEED !== undefined ? [ONLY_SEED] : Array.from({ length: CASES }, (_, n) => FIRST_SEED + n);
    const stream = Stream.create();
    const failures: string[] = [];
    const kernels = new Map<string, number>();
    let sampled = 0;
    const t0 = Date.now();
    try {
      for (const seed of seeds) {
        const f = drawCase(seed);
        const form = f.denseForm ?? "API";
        kernels.set(form, (kernels.get(form) ?? 0) + 1);
        try {
          if (runCase(f, stream)) sampled++;
        } catch (e) {
          failures.push(`seed ${seed} (rerun: FLASHMLA_FUZZ_SEED=${seed}) ${describeCase(f)}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    } finally {
      stream.dispose();
    }
    t.diagnostic(`${seeds.length} cases (${sampled} on sampled rows), forms ${[...kernels].map(([k, n]) => `${k} ${n}`).join(", ")}, ${((Date.now() - t0) / 1000).toFixed(1)} s, ${failures.length} failed`);
    assert.equal(failures.length, 0, `${failures.length} of ${seeds.length} fuzz cases failed:\n${failures.slice(0, 10).join("\n")}`);
  });
});
