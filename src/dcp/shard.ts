/**
 * Decode context parallelism (DCP, issue #35): one request's KV cache split by token over N ranks.
 *
 * Global position `pos` of a request lives on rank `floor(pos / interleave) % ranks`, at local position
 * `floor(pos / (interleave · ranks)) · interleave + pos % interleave`: runs of `interleave` tokens are
 * dealt to the ranks in turn. When interleave is a multiple of the page size, whole pages go to one
 * rank. Everything here is host-side bookkeeping on plain arrays: the per-rank lengths, block tables,
 * caches and sparse index lists that let each rank decode its shard with the unchanged kernels.
 */
import { ArgumentError, describeValue, formatShape } from "../errors/ArgumentError.js";
import { checkTypedArray } from "../numeric/checkArrayArgument.js";
import { FP8_TOKEN_BYTES } from "../numeric/kvCacheFp8.js";

/** Where a global position lives: its rank and its position in that rank's shard of the request. */
export interface DcpSlot {
  rank: number;
  local: number;
}

/**
 * The rank that holds global position `pos` of a request, and the position it has there.
 *
 * @example
 * dcpOwner(130, 2, 64); // { rank: 0, local: 66 }: tokens 128..191 are rank 0's second run
 */
export function dcpOwner(pos: number, ranks: number, interleave: number): DcpSlot {
  const fn = "dcpOwner";
  checkLayout(fn, ranks, interleave);
  intAtLeast(fn, "pos", pos, 0);
  return ownerOf(pos, ranks, interleave);
}

/** The inverse of {@link dcpOwner}: the global position of local position `local` on rank `rank`. */
export function dcpGlobalPosition(rank: number, local: number, ranks: number, interleave: number): number {
  const fn = "dcpGlobalPosition";
  checkLayout(fn, ranks, interleave);
  checkRank(fn, rank, ranks);
  intAtLeast(fn, "local", local, 0);
  const run = Math.floor(local / interleave); // the rank's run number
  return (run * ranks + rank) * interleave + (local % interleave);
}

/**
 * Tokens of a request of `globalLength` tokens that rank `rank` holds, in closed form. Since a rank's
 * tokens keep their global order, this is also the number of its tokens below any global limit.
 */
export function dcpLocalLength(globalLength: number, rank: number, ranks: number, interleave: number): number {
  const fn = "dcpLocalLength";
  checkLayout(fn, ranks, interleave);
  checkRank(fn, rank, ranks);
  intAtLeast(fn, "globalLength", globalLength, 0);
  return localLength(globalLength, rank, ranks, interleave);
}

/** Options of {@link planDcpShards}. */
export interface DcpShardPlanOptions {
  /** [b] global length of each request (tokens in its cache). */
  cacheSeqlens: Int32Array;
  /** Number of DCP ranks N (≥ 1). */
  ranks: number;
  /** Tokens per run dealt to one rank (≥ 1); a multiple of pageSize moves whole pages. */
  interleave: number;
  /** Tokens per page of every rank's paged cache (64 for the dense kernels). */
  pageSize: number;
  /**
   * Block id written into the block-table entries past each request's local pages (no kernel reads them).
   * @default 0
   */
  unusedBlockId?: number;
}

/** One rank's share of a batch: its paged cache layout, each request's pages numbered consecutively. */
export interface DcpRankShard {
  rank: number;
  /** [b] tokens of each request on this rank: `cache_seqlens` of its decode. */
  localSeqlens: Int32Array;
  /** [b] pages of each request on this rank, ceil(localSeqlens / pageSize). */
  blocksPerSeq: Int32Array;
  /** [b] this rank's first page of each request; request i holds pages firstBlock[i] .. + blocksPerSeq[i] − 1. */
  firstBlock: Int32Array;
  /** Columns of `blockTable`: the largest blocksPerSeq, at least 1. */
  maxBlocksPerSeq: number;
  /** Pages of this rank's cache: Σ blocksPerSeq, at least 1 (so an empty shard still has a cache to point at). */
  numBlocks: number;
  /** [b, maxBlocksPerSeq] this rank's `block_table`; entries past blocksPerSeq[i] hold `unusedBlockId`. */
  blockTable: Int32Array;
}

/** What {@link planDcpShards} returns: the layout options and one {@link DcpRankShard} per rank. */
export interface DcpShardPlan {
  ranks: number;
  interleave: number;
  pageSize: number;
  /** Requests in the batch. */
  b: number;
  /** [b] the global lengths (a copy). */
  cacheSeqlens: Int32Array;
  /** [ranks] */
  shards: DcpRankShard[];
}

/**
 * Splits a batch over DCP ranks: each rank's local lengths, and a paged layout for its cache in which
 * request 0's local pages come first, then request 1's, and so on. `shardDenseCacheHost` fills caches
 * laid out this way; a serving engine would allocate pages its own way and only needs `localSeqlens`.
 *
 * @example
 * const plan = planDcpShards({ cacheSeqlens: Int32Array.of(300, 5), ranks: 2, interleave: 64, pageSize: 64 });
 * plan.shards[1].localSeqlens; // Int32Array [128, 0]
 */
export function planDcpShards(opts: DcpShardPlanOptions): DcpShardPlan {
  const fn = "planDcpShards";
  if (opts === null || typeof opts !== "object") throw new ArgumentError(fn, "opts", "an options object", describeValue(opts));
  const { ranks, interleave, pageSize, unusedBlockId = 0 } = opts;
  checkLayout(fn, ranks, interleave);
  intAtLeast(fn, "pageSize", pageSize, 1);
  if (!Number.isInteger(unusedBlockId)) throw new ArgumentError(fn, "unusedBlockId", "an integer", describeValue(unusedBlockId));
  const cacheSeqlens = checkLengths(fn, "cacheSeqlens", opts.cacheSeqlens);
  const b = cacheSeqlens.length;
  if (b < 1) throw new ArgumentError(fn, "cacheSeqlens", "at least one request", "an empty array");

  const shards: DcpRankShard[] = [];
  for (let rank = 0; rank < ranks; rank++) {
    const localSeqlens = cacheSeqlens.map((len) => localLength(len, rank, ranks, interleave));
    const blocksPerSeq = localSeqlens.map((len) => Math.ceil(len / pageSize));
    const firstBlock = new Int32Array(b);
    let next = 0;
    for (let i = 0; i < b; i++) {
      firstBlock[i] = next;
      next += blocksPerSeq[i];
    }
    const maxBlocksPerSeq = blocksPerSeq.reduce((m, n) => Math.max(m, n), 1);
    const blockTable = new Int32Array(b * maxBlocksPerSeq).fill(unusedBlockId); // [b, maxBlocksPerSeq]
    for (let i = 0; i < b; i++) {
      for (let k = 0; k < blocksPerSeq[i]; k++) blockTable[i * maxBlocksPerSeq + k] = firstBlock[i] + k;
    }
    shards.push({ rank, localSeqlens, blocksPerSeq, firstBlock, maxBlocksPerSeq, numBlocks: Math.max(1, next), blockTable });
  }
  return { ranks, interleave, pageSize, b, cacheSeqlens: Int32Array.from(cacheSeqlens), shards };
}

/** Arguments of {@link shardDenseCacheHost}: the global dense paged cache on the host. */
export interface ShardDenseCacheArgs<T extends Uint8Array | Uint16Array> {
  /** [num_blocks, pageSize, h_kv, d] elements (bf16/fp16 bits as a Uint16Array, or bytes), row-major. */
  kCache: T;
  /** [b, max_blocks] the global block table: the physical page of each request's logical page. */
  blockTable: Int32Array;
  /** Elements of one token row, h_kv · d (h_kv · 576 for the dense cache, h_kv · 512 at DeepSeek-V4's head). */
  tokenElements: number;
  /** Written into every slot no token is copied to (a NaN bit pattern poisons them). @default 0 */
  fill?: number;
}

/**
 * Copies each request's tokens from a global dense paged cache into per-rank caches laid out by `plan`:
 * token `pos` of request i goes to rank dcpOwner(pos).rank, row `local % pageSize` of its page
 * `plan.shards[rank].blockTable[i][local / pageSize]`. Returns one array per rank, of the input's type,
 * shaped [shards[rank].numBlocks, pageSize, tokenElements]; slots past each local length hold `fill`.
 */
export function shardDenseCacheHost<T extends Uint8Array | Uint16Array>(plan: DcpShardPlan, args: ShardDenseCacheArgs<T>): T[] {
  const fn = "shardDenseCacheHost";
  checkPlan(fn, plan);
  if (args === null || typeof args !== "object") throw new ArgumentError(fn, "args", "an options object", describeValue(args));
  const { kCache, blockTable, tokenElements, fill = 0 } = args;
  if (!(kCache instanceof Uint16Array || kCache instanceof Uint8Array)) {
    throw new ArgumentError(fn, "kCache", "a Uint16Array (bf16/fp16 bits) or a Uint8Array", describeValue(kCache));
  }
  intAtLeast(fn, "tokenElements", tokenElements, 1);
  if (typeof fill !== "number" || Number.isNaN(fill)) throw new ArgumentError(fn, "fill", "a number (an element bit pattern)", describeValue(fill));
  const { b, pageSize, ranks, interleave, cacheSeqlens } = plan;
  const pageElements = pageSize * tokenElements;
  if (kCache.length % pageElements !== 0) {
    throw new ArgumentError(fn, "kCache", `a multiple of pageSize · tokenElements = ${pageElements} elements`, `${kCache.length}`);
  }
  const numBlocks = kCache.length / pageElements;
  const maxBlocks = tableColumns(fn, blockTable, b);
  for (let i = 0; i < b; i++) {
    const needed = Math.ceil(cacheSeqlens[i] / pageSize);
    if (needed > maxBlocks) {
      throw new ArgumentError(fn, "blockTable", `at least ${needed} columns for request ${i} (length ${cacheSeqlens[i]})`, `${maxBlocks}`);
    }
    for (let k = 0; k < needed; k++) {
      const block = blockTable[i * maxBlocks + k];
      if (!(block >= 0 && block < numBlocks)) {
        throw new ArgumentError(fn, "blockTable", `page ids in [0, ${numBlocks}) for the used pages`, `blockTable[${i}][${k}] = ${block}`);
      }
    }
  }

  const outs = plan.shards.map((s) => {
    const a = kCache instanceof Uint16Array ? new Uint16Array(s.numBlocks * pageElements) : new Uint8Array(s.numBlocks * pageElements);
    return a.fill(fill) as T;
  });
  for (let i = 0; i < b; i++) {
    for (let pos = 0; pos < cacheSeqlens[i]; pos++) {
      const src = (blockTable[i * maxBlocks + Math.floor(pos / pageSize)] * pageSize + (pos % pageSize)) * tokenElements;
      const { rank, local } = ownerOf(pos, ranks, interleave);
      const shard = plan.shards[rank];
      const page = shard.blockTable[i * shard.maxBlocksPerSeq + Math.floor(local / pageSize)];
      outs[rank].set(kCache.subarray(src, src + tokenElements), (page * pageSize + (local % pageSize)) * tokenElements);
    }
  }
  return outs;
}

/**
 * Which rank holds each page of a global sparse (FP8) cache, and where: page `p` lives on rank
 * `rankOf[p]` as its page `localPage[p]` (both −1 for a page no rank holds). A token id
 * `p · pageBlockSize + offset` becomes `localPage[p] · pageBlockSize + offset` on that rank.
 */
export interface DcpPageMap {
  ranks: number;
  pageBlockSize: number;
  /** Pages of the global cache. */
  numPages: number;
  /** [numPages] */
  rankOf: Int32Array;
  /** [numPages] */
  localPage: Int32Array;
  /** [ranks] pages of each rank's cache (at least 1). */
  localNumPages: Int32Array;
}

/**
 * A page map for a cache without requests: page p goes to rank p % ranks as its page floor(p / ranks).
 * Any page map gives the same merged decode; this one balances the pages.
 */
export function dcpPageMapRoundRobin(opts: { numPages: number; ranks: number; pageBlockSize: number }): DcpPageMap {
  const fn = "dcpPageMapRoundRobin";
  if (opts === null || typeof opts !== "object") throw new ArgumentError(fn, "opts", "an options object", describeValue(opts));
  const { numPages, ranks, pageBlockSize } = opts;
  intAtLeast(fn, "numPages", numPages, 1);
  intAtLeast(fn, "ranks", ranks, 1);
  intAtLeast(fn, "pageBlockSize", pageBlockSize, 1);
  const rankOf = new Int32Array(numPages);
  const localPage = new Int32Array(numPages);
  for (let p = 0; p < numPages; p++) {
    rankOf[p] = p % ranks;
    localPage[p] = Math.floor(p / ranks);
  }
  const localNumPages = Int32Array.from({ length: ranks }, (_, r) => Math.max(1, Math.ceil((numPages - r) / ranks)));
  return { ranks, pageBlockSize, numPages, rankOf, localPage, localNumPages };
}

/**
 * A page map that follows the token rule: the pages of each request go where `plan` puts their tokens,
 * as the pages `plan` numbers for them (so the per-rank block tables of the plan address the same pages).
 * Needs whole pages per rank (plan.interleave a multiple of plan.pageSize, the page block size here)
 * and each page used by at most one request; pages of no request get −1.
 */
export function dcpPageMapFromRequests(plan: DcpShardPlan, args: { blockTable: Int32Array; numPages: number }): DcpPageMap {
  const fn = "dcpPageMapFromRequests";
  checkPlan(fn, plan);
  const { ranks, interleave, pageSize, b, cacheSeqlens } = plan;
  if (interleave % pageSize !== 0) {
    throw new ArgumentError(fn, "plan", "interleave a multiple of pageSize (whole pages on one rank)", `interleave ${interleave}, pageSize ${pageSize}`);
  }
  if (args === null || typeof args !== "object") throw new ArgumentError(fn, "args", "an options object", describeValue(args));
  const { blockTable, numPages } = args;
  intAtLeast(fn, "numPages", numPages, 1);
  const maxBlocks = tableColumns(fn, blockTable, b);
  const rankOf = new Int32Array(numPages).fill(-1);
  const localPage = new Int32Array(numPages).fill(-1);
  for (let i = 0; i < b; i++) {
    const pages = Math.ceil(cacheSeqlens[i] / pageSize);
    if (pages > maxBlocks) throw new ArgumentError(fn, "blockTable", `at least ${pages} columns for request ${i}`, `${maxBlocks}`);
    for (let k = 0; k < pages; k++) {
      const p = blockTable[i * maxBlocks + k];
      if (!(p >= 0 && p < numPages)) throw new ArgumentError(fn, "blockTable", `page ids in [0, ${numPages})`, `blockTable[${i}][${k}] = ${p}`);
      if (rankOf[p] !== -1) throw new ArgumentError(fn, "blockTable", "each page used by one request", `page ${p} again at blockTable[${i}][${k}]`);
      const { rank, local } = ownerOf(k * pageSize, ranks, interleave);
      const shard = plan.shards[rank];
      rankOf[p] = rank;
      localPage[p] = shard.blockTable[i * shard.maxBlocksPerSeq + local / pageSize];
    }
  }
  const localNumPages = Int32Array.from(plan.shards, (s) => s.numBlocks);
  return { ranks, pageBlockSize: pageSize, numPages, rankOf, localPage, localNumPages };
}

/** Arguments of {@link shardSparseIndicesHost}. */
export interface ShardSparseIndicesArgs {
  /** [b, s_q, topk] physical token ids of the global cache; −1 or any id outside it is skipped. */
  indices: Int32Array;
  sQ: number;
  topk: number;
  /** [b] when the decode uses it: entries at positions ≥ topkLength[i] are ignored (−1 on every rank). */
  topkLength?: Int32Array;
}

/**
 * Each rank's index list for a sparse decode of its shard: the same shape [b, s_q, topk] and positions
 * (so topkLength keeps its meaning), an entry the rank holds translated to its local token id, every
 * other entry −1. A token in a page no rank holds is an error, unless its entry is past topkLength.
 */
export function shardSparseIndicesHost(pageMap: DcpPageMap, args: ShardSparseIndicesArgs): Int32Array[] {
  const fn = "shardSparseIndicesHost";
  checkPageMap(fn, pageMap);
  if (args === null || typeof args !== "object") throw new ArgumentError(fn, "args", "an options object", describeValue(args));
  const { indices, sQ, topk, topkLength } = args;
  checkTypedArray(fn, "indices", indices, Int32Array, "token ids [b, s_q, topk]");
  intAtLeast(fn, "sQ", sQ, 1);
  intAtLeast(fn, "topk", topk, 1);
  if (indices.length % (sQ * topk) !== 0) {
    throw new ArgumentError(fn, "indices", `[b, s_q=${sQ}, topk=${topk}]: a multiple of ${sQ * topk} entries`, `${indices.length}`);
  }
  const b = indices.length / (sQ * topk);
  if (topkLength !== undefined) {
    checkTypedArray(fn, "topkLength", topkLength, Int32Array, "lengths [b]");
    if (topkLength.length !== b) throw new ArgumentError(fn, "topkLength", `[b=${b}]`, formatShape([topkLength.length]));
  }
  const { ranks, pageBlockSize, numPages, rankOf, localPage } = pageMap;
  const numTokens = numPages * pageBlockSize;
  const outs = Array.from({ length: ranks }, () => new Int32Array(indices.length).fill(-1));
  for (let row = 0; row < b * sQ; row++) {
    const i = Math.floor(row / sQ);
    const limit = topkLength === undefined ? topk : topkLength[i];
    for (let k = 0; k < limit && k < topk; k++) {
      const at = row * topk + k;
      const id = indices[at];
      if (!(id >= 0 && id < numTokens)) continue;
      const p = Math.floor(id / pageBlockSize);
      const rank = rankOf[p];
      if (rank < 0) {
        throw new ArgumentError(fn, "indices", "ids in pages the page map places on a rank", `indices[${i}][${row % sQ}][${k}] = ${id} (page ${p})`);
      }
      outs[rank][at] = localPage[p] * pageBlockSize + (id % pageBlockSize);
    }
  }
  return outs;
}

/** Arguments of {@link shardSparseCacheHost}: the global V32 FP8 cache on the host. */
export interface ShardSparseCacheArgs {
  /** [num_pages, pageBlockSize, 1, 656] bytes; each page starts `blockStrideBytes` after the last. */
  kCache: Uint8Array;
  /** @default pageBlockSize · 656 */
  blockStrideBytes?: number;
  /** Byte written into every page no global page is copied to. @default 0 */
  fill?: number;
}

/**
 * Copies each page a rank holds (pageBlockSize tokens of 656 bytes) into that rank's cache. Returns one
 * array per rank shaped [localNumPages[rank], pageBlockSize, 1, 656] (block stride pageBlockSize · 656).
 */
export function shardSparseCacheHost(pageMap: DcpPageMap, args: ShardSparseCacheArgs): Uint8Array[] {
  const fn = "shardSparseCacheHost";
  checkPageMap(fn, pageMap);
  if (args === null || typeof args !== "object") throw new ArgumentError(fn, "args", "an options object", describeValue(args));
  const { kCache, fill = 0 } = args;
  checkTypedArray(fn, "kCache", kCache, Uint8Array, "V32 FP8 tokens [num_pages, page_block_size, 1, 656]");
  const { pageBlockSize, numPages, rankOf, localPage, localNumPages } = pageMap;
  const pageBytes = pageBlockSize * FP8_TOKEN_BYTES;
  const stride = args.blockStrideBytes ?? pageBytes;
  intAtLeast(fn, "blockStrideBytes", stride, pageBytes);
  intAtLeast(fn, "fill", fill, 0);
  const needed = (numPages - 1) * stride + pageBytes;
  if (kCache.length < needed) throw new ArgumentError(fn, "kCache", `at least ${needed} bytes for ${numPages} pages`, `${kCache.length}`);
  const outs = Array.from(localNumPages, (n) => new Uint8Array(n * pageBytes).fill(fill));
  for (let p = 0; p < numPages; p++) {
    if (rankOf[p] < 0) continue;
    outs[rankOf[p]].set(kCache.subarray(p * stride, p * stride + pageBytes), localPage[p] * pageBytes);
  }
  return outs;
}

/** @internal `ranks` and `interleave` of a DCP layout: integers ≥ 1. */
export function checkLayout(fn: string, ranks: number, interleave: number): void {
  intAtLeast(fn, "ranks", ranks, 1);
  intAtLeast(fn, "interleave", interleave, 1);
}

/** @internal A rank of the layout: an integer in [0, ranks). */
export function checkRank(fn: string, rank: number, ranks: number): void {
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= ranks) throw new ArgumentError(fn, "rank", `an integer in [0, ranks=${ranks})`, describeValue(rank));
}

/** @internal A safe integer ≥ `min`. */
export function intAtLeast(fn: string, name: string, v: unknown, min: number): void {
  if (!Number.isSafeInteger(v) || (v as number) < min) throw new ArgumentError(fn, name, `an integer ≥ ${min}`, describeValue(v));
}

/** @internal An Int32Array of lengths ≥ 0. */
export function checkLengths(fn: string, name: string, lengths: unknown): Int32Array {
  checkTypedArray(fn, name, lengths, Int32Array, "lengths");
  lengths.forEach((len, i) => {
    if (len < 0) throw new ArgumentError(fn, name, "lengths ≥ 0", `${name}[${i}] = ${len}`);
  });
  return lengths;
}

/** @internal {@link dcpLocalLength} on checked arguments. */
export function localLength(globalLength: number, rank: number, ranks: number, interleave: number): number {
  const cycle = interleave * ranks; // tokens of one full round over the ranks
  const full = Math.floor(globalLength / cycle);
  const rest = globalLength - full * cycle;
  return full * interleave + Math.min(interleave, Math.max(0, rest - rank * interleave));
}

/** {@link dcpOwner} on checked arguments. */
function ownerOf(pos: number, ranks: number, interleave: number): DcpSlot {
  const run = Math.floor(pos / interleave); // global run number
  return { rank: run % ranks, local: Math.floor(run / ranks) * interleave + (pos % interleave) };
}

/** Columns of a [b, max_blocks] block table. */
function tableColumns(fn: string, blockTable: unknown, b: number): number {
  checkTypedArray(fn, "blockTable", blockTable, Int32Array, "page ids [b, max_blocks]");
  if (blockTable.length % b !== 0 || blockTable.length === 0) {
    throw new ArgumentError(fn, "blockTable", `[b=${b}, max_blocks ≥ 1]: a nonzero multiple of ${b} entries`, `${blockTable.length}`);
  }
  return blockTable.length / b;
}

function checkPlan(fn: string, plan: DcpShardPlan): void {
  if (plan === null || typeof plan !== "object" || !Array.isArray(plan.shards) || plan.shards.length !== plan.ranks) {
    throw new ArgumentError(fn, "plan", "a plan from planDcpShards()", describeValue(plan));
  }
}

function checkPageMap(fn: string, pageMap: DcpPageMap): void {
  if (pageMap === null || typeof pageMap !== "object" || !(pageMap.rankOf instanceof Int32Array) || pageMap.rankOf.length !== pageMap.numPages) {
    throw new ArgumentError(fn, "pageMap", "a page map from dcpPageMapRoundRobin() or dcpPageMapFromRequests()", describeValue(pageMap));
  }
}
