import { ArgumentError, describeValue } from "../errors/ArgumentError.js";
import { D_V } from "../mla/contract/shape.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { dcpCausalForm, dcpFlattenBlockTable, type DcpCausalFormName } from "./causal.js";
import { checkLayout, checkRank, intAtLeast } from "./shard.js";

/** Options of `DcpStep.dense`: one rank's view of a dense decode step. */
export interface DcpDenseStepOptions {
  rank: number;
  ranks: number;
  /** Tokens per run dealt to one rank: global position p lives on rank floor(p / interleave) % ranks. */
  interleave: number;
  /** [b] global length of each request (the whole context, all ranks together). */
  cacheSeqlens: Int32Array;
  /** [b, maxBlocks] this rank's block table: the pages of its own cache holding each request's local tokens. */
  blockTable: Int32Array;
  /** Query tokens per request. */
  sQ: number;
  /** With sQ > 1: query token j sees the global positions below S − (sQ − 1 − j). */
  causal: boolean;
  /** @default 0 */
  deviceOrdinal?: number;
  /** Stream for the uploads (the step's tensors are ready once it has run them). */
  stream?: Stream;
}

/** Options of `DcpStep.sparse`. */
export interface DcpSparseStepOptions {
  rank: number;
  ranks: number;
  /** @default 0 */
  deviceOrdinal?: number;
}

/** The gather buffers of one output shape: every rank's out and lse side by side. */
interface Workspace {
  key: string;
  outParts: Tensor;
  lseParts: Tensor<"f32">;
  /** One rank's weighted term before a reduce-scatter: b·s_q·h_q·512 elements. */
  term: Tensor;
}

/**
 * What one rank needs for every layer of a decode-context-parallel step, built once per step (as the
 * engines build their per-step metadata) and reused by each layer's `dcpDecode`: the rank's block table
 * and local lengths on its GPU, the form its dense decode takes under a causal mask in global positions,
 * and the buffers its communication gathers into.
 *
 * Causal decoding with s_q > 1: query token j of a request of global length S sees the positions below
 * S − (s_q − 1 − j); on a rank that is a count of its own tokens. Where those counts equal the rank's
 * local length (no masked token on this rank) the dense kernel runs without its mask; where they equal
 * its own causal rule it runs with it; otherwise the rank's s_q query tokens become b·s_q rows of one
 * token, each with its own length ("flatten": the same FLOPs, the cache read once per query token).
 * Every rank of a step takes the same lse layout, so a step flattens on all ranks if one rank must.
 */
export class DcpStep {
  /** Decode inputs of this rank: block table ([b·s_q, maxBlocks] when flattened) and lengths, on its GPU. */
  readonly blockTable: Tensor<"i32"> | undefined;
  readonly cacheSeqlens: Tensor<"i32"> | undefined;
  private workspace: Workspace | undefined;
  private disposed = false;

  private constructor(
    readonly kind: "dense" | "sparse",
    readonly rank: number,
    readonly ranks: number,
    readonly deviceOrdinal: number,
    /** "nonCausal" | "causal" | "flatten" (dense); "nonCausal" for sparse steps. */
    readonly form: DcpCausalFormName,
    readonly sQ: number | undefined,
    tensors?: { blockTable: Tensor<"i32">; cacheSeqlens: Tensor<"i32"> },
  ) {
    this.blockTable = tensors?.blockTable;
    this.cacheSeqlens = tensors?.cacheSeqlens;
  }

  /** A dense step: uploads this rank's decode inputs (flattened where the causal mask needs it). */
  static dense(opts: DcpDenseStepOptions): DcpStep {
    const fn = "DcpStep.dense";
    if (opts === null || typeof opts !== "object") throw new ArgumentError(fn, "opts", "an options object", describeValue(opts));
    const { rank, ranks, interleave, sQ, cacheSeqlens, blockTable } = opts;
    checkLayout(fn, ranks, interleave);
    checkRank(fn, rank, ranks);
    intAtLeast(fn, "sQ", sQ, 1);
    if (typeof opts.causal !== "boolean") throw new ArgumentError(fn, "causal", "a boolean", describeValue(opts.causal));
    if (!(cacheSeqlens instanceof Int32Array) || cacheSeqlens.length < 1) throw new ArgumentError(fn, "cacheSeqlens", "an Int32Array [b], b >= 1", describeValue(cacheSeqlens));
    const b = cacheSeqlens.length;
    if (!(blockTable instanceof Int32Array) || blockTable.length < b || blockTable.length % b !== 0) {
      throw new ArgumentError(fn, "blockTable", `an Int32Array [b = ${b}, maxBlocks]`, describeValue(blockTable));
    }
    const ordinal = opts.deviceOrdinal ?? 0;
    const causal = opts.causal && sQ > 1;
    const forms = causal ? Array.from({ length: ranks }, (_, r) => dcpCausalForm({ cacheSeqlens, sQ, rank: r, ranks, interleave })) : undefined;
    const mine = forms?.[rank] ?? dcpCausalForm({ cacheSeqlens, sQ: 1, rank, ranks, interleave });
    const form: DcpCausalFormName = forms === undefined ? "nonCausal" : forms.some((f) => f.form === "flatten") ? "flatten" : mine.form;
    const maxBlocks = blockTable.length / b;
    for (let i = 0; i < b; i++) {
      const need = Math.ceil(mine.localSeqlens[i] / 64);
      if (need > maxBlocks) throw new ArgumentError(fn, "blockTable", `at least ${need} pages for request ${i} (${mine.localSeqlens[i]} local tokens)`, `${maxBlocks} columns`);
    }
    const table = form === "flatten" ? dcpFlattenBlockTable(blockTable, b, sQ) : blockTable;
    const lengths = form === "flatten" ? mine.visibleLengths : mine.localSeqlens;
    const rows = form === "flatten" ? b * sQ : b;
    const up = <T extends Int32Array>(data: T, shape: number[]) => Tensor.toDevice(Tensor.fromHost(data, shape, "i32"), ordinal, opts.stream);
    const t = up(table, [rows, maxBlocks]);
    try {
      return new DcpStep("dense", rank, ranks, ordinal, form, sQ, { blockTable: t, cacheSeqlens: up(lengths, [rows]) });
    } catch (e) {
      t.dispose();
      throw e;
    }
  }

  /** A sparse step: each layer's indices are the rank's own (its local token ids, -1 where another rank holds the token). */
  static sparse(opts: DcpSparseStepOptions): DcpStep {
    const fn = "DcpStep.sparse";
    if (opts === null || typeof opts !== "object") throw new ArgumentError(fn, "opts", "an options object", describeValue(opts));
    checkLayout(fn, opts.ranks, 1);
    checkRank(fn, opts.rank, opts.ranks);
    return new DcpStep("sparse", opts.rank, opts.ranks, opts.deviceOrdinal ?? 0, "nonCausal", undefined);
  }

  /**
   * The buffers every rank's out [b, s_q, h_q, 512] and lse [b, h_q, s_q] gather into, kept for the
   * step's layers (one shape at a time; a new shape frees the old ones).
   * @internal
   */
  gatherBuffers(shape: { b: number; s_q: number; h_q: number }, dtype: "bf16" | "fp16"): Omit<Workspace, "key"> {
    if (this.disposed) throw new Error("DcpStep: used after dispose()");
    const key = `${shape.b}x${shape.s_q}x${shape.h_q}:${dtype}`;
    if (this.workspace?.key !== key) {
      this.freeWorkspace();
      const made: Tensor[] = [];
      const alloc = <T extends Tensor>(t: () => T): T => {
        const x = t();
        made.push(x);
        return x;
      };
      try {
        this.workspace = {
          key,
          outParts: alloc(() => Tensor.emptyDevice([this.ranks, shape.b, shape.s_q, shape.h_q, D_V], dtype, this.deviceOrdinal)),
          lseParts: alloc(() => Tensor.emptyDevice([this.ranks, shape.b, shape.h_q, shape.s_q], "f32", this.deviceOrdinal)),
          term: alloc(() => Tensor.emptyDevice([shape.b * shape.s_q * shape.h_q * D_V], dtype, this.deviceOrdinal)),
        };
      } catch (e) {
        made.forEach((t) => t.dispose());
        throw e;
      }
    }
    return this.workspace;
  }

  /** Frees the step's device tensors; idempotent. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.blockTable?.dispose();
    this.cacheSeqlens?.dispose();
    this.freeWorkspace();
  }

  private freeWorkspace(): void {
    this.workspace?.outParts.dispose();
    this.workspace?.lseParts.dispose();
    this.workspace?.term.dispose();
    this.workspace = undefined;
  }
}
