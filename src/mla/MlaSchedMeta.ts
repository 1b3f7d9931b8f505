import { ArgumentError } from "../errors/ArgumentError.js";
import { Tensor } from "../runtime/Tensor.js";

/** The batch configuration a scheduler-metadata object was filled for (FlashMLA's `config`). */
export interface MlaSchedConfig {
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  page_block_size: number;
  causal: boolean;
  is_fp8_kvcache: boolean;
  topk: number | null;
}

/**
 * Tile-scheduler metadata and the split-KV workspace of one decode step, reused by every layer of the
 * step (FlashMLA's FlashMLASchedMeta). It is filled on the GPU by the first `flashMlaWithKvcache` call,
 * from that call's cacheSeqlens; later calls must use the same batch shape (an ArgumentError names the
 * field that changed) and the same lengths (not re-checked, as in FlashMLA). Make a new one per step
 * when lengths change. `dispose()` frees the device memory; safe to call twice.
 */
export class MlaSchedMeta {
  config: MlaSchedConfig | undefined;
  /** [numSmParts, 8] int32 on the GPU. */
  schedMeta: Tensor | undefined;
  /** [b + 1] int32 on the GPU. */
  numSplits: Tensor | undefined;
  /** [numSplitSlots, h_kv, rows_per_kv, 512] f32 split partials. */
  oAccum: Tensor | undefined;
  /** [numSplitSlots, h_kv, rows_per_kv] f32. */
  lseAccum: Tensor | undefined;
  /** Sparse calls without topkLength: [b] int32 filled with topk (the lengths the scheduler balances). */
  lengths: Tensor | undefined;
  numSmParts = 0;
  numSplitSlots = 0;
  private disposed = false;

  get initialized(): boolean {
    return this.config !== undefined;
  }

  /** Throws unless `config` equals the one this object was filled for. */
  checkConfig(fn: string, config: MlaSchedConfig): void {
    if (this.disposed) throw new ArgumentError(fn, "schedMeta", "live scheduler metadata", "a disposed MlaSchedMeta");
    if (!this.config) return;
    for (const key of Object.keys(config) as Array<keyof MlaSchedConfig>) {
      if (this.config[key] !== config[key]) {
        throw new ArgumentError(
          fn,
          "schedMeta",
          `metadata for ${key} = ${String(this.config[key])} (it was filled for that batch; call getMlaMetadata() again for a new shape)`,
          `${key} = ${String(config[key])}`,
        );
      }
    }
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.releaseWorkspace();
  }

  /**
   * Frees the device tensors (also after an allocation failed part-way, so a retry starts clean) and
   * leaves the object unfilled.
   */
  releaseWorkspace(): void {
    for (const t of [this.schedMeta, this.numSplits, this.oAccum, this.lseAccum, this.lengths]) t?.dispose();
    this.schedMeta = this.numSplits = this.oAccum = this.lseAccum = this.lengths = undefined;
    this.config = undefined;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * Returns empty scheduler metadata for one decode step, filled by the first flashMlaWithKvcache call
 * (FlashMLA's `get_mla_metadata()`; its old positional arguments are accepted and ignored).
 */
export function getMlaMetadata(..._legacyArgs: unknown[]): MlaSchedMeta {
  return new MlaSchedMeta();
}
