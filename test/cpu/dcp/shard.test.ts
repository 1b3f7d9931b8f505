import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  dcpGlobalPosition,
  dcpLocalLength,
  dcpOwner,
  dcpPageMapFromRequests,
  dcpPageMapRoundRobin,
  planDcpShards,
  shardDenseCacheHost,
  shardSparseCacheHost,
  shardSparseIndicesHost,
} from "../../../src/dcp/shard.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";

const RANKS = [1, 2, 3, 4, 5, 8];
const INTERLEAVES = [1, 2, 3, 7, 64, 128];

/** Asserts that `call` throws an ArgumentError of function `fn` naming `argument`. */
function throwsArgument(call: () => unknown, fn: string, argument: string): void {
  assert.throws(call, (e: unknown) => e instanceof ArgumentError && e.fn === fn && e.argument === argument, `${fn}(): '${argument}'`);
}

describe("dcpOwner(), dcpGlobalPosition() and dcpLocalLength()", () => {
  test("dcpOwner() follows the token rule and dcpGlobalPosition() inverts it", () => {
    for (const ranks of RANKS) {
      for (const interleave of INTERLEAVES) {
        const seen = Array.from({ length: ranks }, () => 0); // tokens dealt to each rank so far
        for (let pos = 0; pos < 3 * ranks * interleave + 5; pos++) {
          const { rank, local } = dcpOwner(pos, ranks, interleave);
          assert.equal(rank, Math.floor(pos / interleave) % ranks);
          // Local positions count the rank's earlier tokens: the shard keeps global order, without gaps.
          assert.equal(local, seen[rank]++, `pos ${pos}, ranks ${ranks}, interleave ${interleave}`);
          assert.equal(local, dcpLocalLength(pos, rank, ranks, interleave));
          assert.equal(dcpGlobalPosition(rank, local, ranks, interleave), pos);
        }
      }
    }
  });

  test("dcpOwner() inverts dcpGlobalPosition() on every rank", () => {
    for (const ranks of RANKS) {
      for (const interleave of INTERLEAVES) {
        for (let rank = 0; rank < ranks; rank++) {
          for (let local = 0; local < 3 * interleave + 2; local++) {
            assert.deepEqual(dcpOwner(dcpGlobalPosition(rank, local, ranks, interleave), ranks, interleave), { rank, local });
          }
        }
      }
    }
  });

  test("dcpLocalLength() counts each rank's tokens and the counts sum to the global length", () => {
    for (const ranks of RANKS) {
      for (const interleave of INTERLEAVES) {
        const counts = new Array<number>(ranks).fill(0);
        for (let len = 0; len <= 2 * ranks * interleave + 3; len++) {
          let sum = 0;
          for (let rank = 0; rank < ranks; rank++) {
            const n = dcpLocalLength(len, rank, ranks, interleave);
            assert.equal(n, counts[rank], `len ${len}, rank ${rank}, ranks ${ranks}, interleave ${interleave}`);
            sum += n;
          }
          assert.equal(sum, len);
          if (len <= 2 * ranks * interleave + 2) counts[dcpOwner(len, ranks, interleave).rank]++;
        }
      }
    }
    assert.equal(dcpLocalLength(131072, 3, 8, 64), 16384);
    for (const len of [2 ** 40 + 1, 2 ** 50 + 12345]) {
      assert.equal([0, 1, 2].reduce((a, rank) => a + dcpLocalLength(len, rank, 3, 64), 0), len);
    }
  });

  test("with interleave a multiple of the page size, every 64-token page sits on one rank, page-aligned", () => {
    for (const ranks of [2, 3, 4]) {
      for (const interleave of [64, 128, 192]) {
        for (let page = 0; page < 3 * ranks * (interleave / 64); page++) {
          const first = dcpOwner(page * 64, ranks, interleave);
          assert.equal(first.local % 64, 0);
          for (let t = 1; t < 64; t++) assert.deepEqual(dcpOwner(page * 64 + t, ranks, interleave), { rank: first.rank, local: first.local + t });
        }
      }
    }
  });

  test("the position helpers name each wrong argument", () => {
    throwsArgument(() => dcpOwner(-1, 2, 1), "dcpOwner", "pos");
    throwsArgument(() => dcpOwner(1.5, 2, 1), "dcpOwner", "pos");
    throwsArgument(() => dcpOwner(0, 0, 1), "dcpOwner", "ranks");
    throwsArgument(() => dcpOwner(0, 2.5, 1), "dcpOwner", "ranks");
    throwsArgument(() => dcpOwner(0, 2, 0), "dcpOwner", "interleave");
    throwsArgument(() => dcpOwner(0, 2, NaN), "dcpOwner", "interleave");
    throwsArgument(() => dcpGlobalPosition(2, 0, 2, 1), "dcpGlobalPosition", "rank");
    throwsArgument(() => dcpGlobalPosition(0, -3, 2, 1), "dcpGlobalPosition", "local");
    throwsArgument(() => dcpLocalLength(-1, 0, 2, 1), "dcpLocalLength", "globalLength");
    throwsArgument(() => dcpLocalLength(5, -1, 2, 1), "dcpLocalLength", "rank");
  });
});

describe("planDcpShards()", () => {
  test("planDcpShards() gives each rank its lengths and consecutive pages, request by request", () => {
    const cacheSeqlens = Int32Array.of(300, 5, 0, 129);
    const plan = planDcpShards({ cacheSeqlens, ranks: 3, interleave: 64, pageSize: 64, unusedBlockId: -7 });
    assert.equal(plan.b, 4);
    assert.equal(plan.shards.length, 3);
    // 300 = runs 0..4 (64 each) + 44: ranks get runs {0,3}, {1,4}, {2} → 128, 108, 64.
    assert.deepEqual([...plan.shards.map((s) => s.localSeqlens[0])], [128, 108, 64]);
    assert.deepEqual([...plan.shards.map((s) => s.localSeqlens[1])], [5, 0, 0]);
    assert.deepEqual([...plan.shards.map((s) => s.localSeqlens[3])], [64, 64, 1]);
    const r0 = plan.shards[0];
    assert.deepEqual([...r0.blocksPerSeq], [2, 1, 0, 1]);
    assert.deepEqual([...r0.firstBlock], [0, 2, 3, 3]);
    assert.equal(r0.maxBlocksPerSeq, 2);
    assert.equal(r0.numBlocks, 4);
    assert.deepEqual([...r0.blockTable], [0, 1, 2, -7, -7, -7, 3, -7]);
    for (let i = 0; i < 4; i++) {
      assert.equal(plan.shards.reduce((a, s) => a + s.localSeqlens[i], 0), cacheSeqlens[i]);
    }
  });

  test("planDcpShards() gives a rank without tokens one page and a one-column table", () => {
    const plan = planDcpShards({ cacheSeqlens: Int32Array.of(3, 0), ranks: 4, interleave: 1, pageSize: 64 });
    const r3 = plan.shards[3];
    assert.deepEqual([...r3.localSeqlens], [0, 0]);
    assert.equal(r3.numBlocks, 1);
    assert.equal(r3.maxBlocksPerSeq, 1);
    assert.deepEqual([...r3.blockTable], [0, 0]);
  });

  test("planDcpShards() names each wrong argument", () => {
    const ok = { cacheSeqlens: Int32Array.of(4), ranks: 2, interleave: 1, pageSize: 64 };
    throwsArgument(() => planDcpShards({ ...ok, ranks: 0 }), "planDcpShards", "ranks");
    throwsArgument(() => planDcpShards({ ...ok, interleave: 0.5 }), "planDcpShards", "interleave");
    throwsArgument(() => planDcpShards({ ...ok, pageSize: 0 }), "planDcpShards", "pageSize");
    throwsArgument(() => planDcpShards({ ...ok, cacheSeqlens: Int32Array.of(4, -1) }), "planDcpShards", "cacheSeqlens");
    throwsArgument(() => planDcpShards({ ...ok, cacheSeqlens: new Int32Array(0) }), "planDcpShards", "cacheSeqlens");
    throwsArgument(() => planDcpShards({ ...ok, cacheSeqlens: [4] as unknown as Int32Array }), "planDcpShards", "cacheSeqlens");
    throwsArgument(() => planDcpShards(null as never), "planDcpShards", "opts");
  });
});

describe("shardDenseCacheHost()", () => {
  /** A cache whose token (request i, position t) holds i·1000 + t in every element; unused slots 0xffff. */
  function labelledCache(seqlens: number[], tokenElements: number, pageSize: number) {
    const b = seqlens.length;
    const maxBlocks = Math.max(1, ...seqlens.map((n) => Math.ceil(n / pageSize)));
    const numBlocks = seqlens.reduce((a, n) => a + Math.ceil(n / pageSize), 0) + 1;
    // Pages handed out from the top down, so global and local page numbers differ.
    const blockTable = new Int32Array(b * maxBlocks).fill(2147480000);
    let next = numBlocks - 1;
    seqlens.forEach((n, i) => {
      for (let k = 0; k < Math.ceil(n / pageSize); k++) blockTable[i * maxBlocks + k] = next--;
    });
    const kCache = new Uint16Array(numBlocks * pageSize * tokenElements).fill(0xffff);
    seqlens.forEach((n, i) => {
      for (let t = 0; t < n; t++) {
        const at = (blockTable[i * maxBlocks + Math.floor(t / pageSize)] * pageSize + (t % pageSize)) * tokenElements;
        kCache.fill(i * 1000 + t, at, at + tokenElements);
      }
    });
    return { kCache, blockTable };
  }

  test("shardDenseCacheHost() puts every token at its rank's local slot and fills the rest", () => {
    const seqlens = [300, 5, 0, 129];
    const tokenElements = 3;
    for (const pageSize of [64, 5]) {
      const { kCache, blockTable } = labelledCache(seqlens, tokenElements, pageSize);
      for (const ranks of [1, 2, 3, 4]) {
        for (const interleave of [1, 64, 128]) {
          const plan = planDcpShards({ cacheSeqlens: Int32Array.from(seqlens), ranks, interleave, pageSize });
          const caches = shardDenseCacheHost(plan, { kCache, blockTable, tokenElements, fill: 0x7fc0 });
          plan.shards.forEach((s, rank) => {
            const cache = caches[rank];
            assert.ok(cache instanceof Uint16Array);
            assert.equal(cache.length, s.numBlocks * pageSize * tokenElements);
            let filled = 0;
            seqlens.forEach((_, i) => {
              for (let local = 0; local < s.localSeqlens[i]; local++) {
                const page = s.blockTable[i * s.maxBlocksPerSeq + Math.floor(local / pageSize)];
                const at = (page * pageSize + (local % pageSize)) * tokenElements;
                const want = i * 1000 + dcpGlobalPosition(rank, local, ranks, interleave);
                assert.deepEqual([...cache.subarray(at, at + tokenElements)], new Array(tokenElements).fill(want));
                filled += tokenElements;
              }
            });
            assert.equal(cache.reduce((n, x) => n + (x === 0x7fc0 ? 1 : 0), 0), cache.length - filled);
          });
        }
      }
    }
  });

  test("shardDenseCacheHost() keeps a byte cache as bytes", () => {
    const plan = planDcpShards({ cacheSeqlens: Int32Array.of(3), ranks: 2, interleave: 1, pageSize: 2 });
    const kCache = Uint8Array.of(10, 11, 20, 21, 30, 31, 99, 99); // [2 pages, 2 tokens, 2 bytes]
    const [r0, r1] = shardDenseCacheHost(plan, { kCache, blockTable: Int32Array.of(0, 1), tokenElements: 2, fill: 7 });
    assert.ok(r0 instanceof Uint8Array);
    assert.deepEqual([...r0], [10, 11, 30, 31]);
    assert.deepEqual([...r1], [20, 21, 7, 7]);
  });

  test("shardDenseCacheHost() names each wrong argument", () => {
    const plan = planDcpShards({ cacheSeqlens: Int32Array.of(3), ranks: 2, interleave: 1, pageSize: 2 });
    const kCache = new Uint16Array(8);
    const ok = { kCache, blockTable: Int32Array.of(0, 1), tokenElements: 2 };
    throwsArgument(() => shardDenseCacheHost(plan, { ...ok, kCache: new Float32Array(8) as never }), "shardDenseCacheHost", "kCache");
    throwsArgument(() => shardDenseCacheHost(plan, { ...ok, kCache: new Uint16Array(7) }), "shardDenseCacheHost", "kCache");
    throwsArgument(() => shardDenseCacheHost(plan, { ...ok, tokenElements: 0 }), "shardDenseCacheHost", "tokenElements");
    throwsArgument(() => shardDenseCacheHost(plan, { ...ok, blockTable: Int32Array.of(0) }), "shardDenseCacheHost", "blockTable");
    throwsArgument(() => shardDenseCacheHost(plan, { ...ok, blockTable: Int32Array.of(0, 2) }), "shardDenseCacheHost", "blockTable");
    throwsArgument(() => shardDenseCacheHost({} as never, ok), "shardDenseCacheHost", "plan");
  });
});

describe("sparse page maps, shardSparseIndicesHost() and shardSparseCacheHost()", () => {
  test("dcpPageMapRoundRobin() deals page p to rank p % ranks", () => {
    const map = dcpPageMapRoundRobin({ numPages: 7, ranks: 3, pageBlockSize: 4 });
    assert.deepEqual([...map.rankOf], [0, 1, 2, 0, 1, 2, 0]);
    assert.deepEqual([...map.localPage], [0, 0, 0, 1, 1, 1, 2]);
    assert.deepEqual([...map.localNumPages], [3, 2, 2]);
    assert.deepEqual([...dcpPageMapRoundRobin({ numPages: 1, ranks: 3, pageBlockSize: 4 }).localNumPages], [1, 1, 1]);
    throwsArgument(() => dcpPageMapRoundRobin({ numPages: 0, ranks: 3, pageBlockSize: 4 }), "dcpPageMapRoundRobin", "numPages");
  });

  test("dcpPageMapFromRequests() puts each page where the plan puts its tokens", () => {
    const seqlens = Int32Array.of(10, 3, 0);
    const pageBlockSize = 2;
    // Request 0 in pages 8,1,6,3,5; request 1 in pages 0,7; pages 2 and 4 belong to no request.
    const blockTable = Int32Array.of(8, 1, 6, 3, 5, 0, 7, -1, -1, -1, -1, -1, -1, -1, -1);
    const plan = planDcpShards({ cacheSeqlens: seqlens, ranks: 2, interleave: 4, pageSize: pageBlockSize });
    const map = dcpPageMapFromRequests(plan, { blockTable, numPages: 9 });
    for (let i = 0; i < 3; i++) {
      for (let pos = 0; pos < seqlens[i]; pos++) {
        const { rank, local } = dcpOwner(pos, 2, 4);
        const page = blockTable[i * 5 + Math.floor(pos / pageBlockSize)];
        const s = plan.shards[rank];
        assert.equal(map.rankOf[page], rank);
        assert.equal(map.localPage[page], s.blockTable[i * s.maxBlocksPerSeq + Math.floor(local / pageBlockSize)]);
      }
    }
    assert.equal(map.rankOf[2], -1);
    assert.equal(map.localPage[4], -1);
    assert.deepEqual([...map.localNumPages], [plan.shards[0].numBlocks, plan.shards[1].numBlocks]);
  });

  test("dcpPageMapFromRequests() refuses split pages, shared pages and bad page ids", () => {
    const fn = "dcpPageMapFromRequests";
    const plan = (interleave: number) => planDcpShards({ cacheSeqlens: Int32Array.of(4, 4), ranks: 2, interleave, pageSize: 2 });
    throwsArgument(() => dcpPageMapFromRequests(plan(1), { blockTable: Int32Array.of(0, 1, 2, 3), numPages: 4 }), fn, "plan");
    throwsArgument(() => dcpPageMapFromRequests(plan(2), { blockTable: Int32Array.of(0, 1, 1, 3), numPages: 4 }), fn, "blockTable");
    throwsArgument(() => dcpPageMapFromRequests(plan(2), { blockTable: Int32Array.of(0, 1, 2, 4), numPages: 4 }), fn, "blockTable");
    throwsArgument(() => dcpPageMapFromRequests(plan(2), { blockTable: Int32Array.of(0, 1, 2), numPages: 4 }), fn, "blockTable");
    throwsArgument(() => dcpPageMapFromRequests(plan(2), { blockTable: Int32Array.of(0, 1, 2, 3), numPages: 0 }), fn, "numPages");
  });

  test("shardSparseIndicesHost() keeps positions, translates owned ids and sets the rest to −1", () => {
    const map = dcpPageMapRoundRobin({ numPages: 5, ranks: 2, pageBlockSize: 4 });
    // [b=2, s_q=1, topk=4]; 20 tokens in the cache, so 20 and −3 are skips.
    const indices = Int32Array.of(0, 5, 19, -1, 9, 20, -3, 13);
    const [r0, r1] = shardSparseIndicesHost(map, { indices, sQ: 1, topk: 4 });
    // Page 0 → r0 page 0, page 1 → r1 page 0, page 2 → r0 page 1, page 3 → r1 page 1, page 4 → r0 page 2.
    assert.deepEqual([...r0], [0, -1, 11, -1, 5, -1, -1, -1]);
    assert.deepEqual([...r1], [-1, 1, -1, -1, -1, -1, -1, 5]);
    // Past topkLength every entry is −1, so the ranks agree on what topkLength means.
    const [c0, c1] = shardSparseIndicesHost(map, { indices, sQ: 1, topk: 4, topkLength: Int32Array.of(2, 0) });
    assert.deepEqual([...c0], [0, -1, -1, -1, -1, -1, -1, -1]);
    assert.deepEqual([...c1], [-1, 1, -1, -1, -1, -1, -1, -1]);
  });

  test("shardSparseIndicesHost() refuses an id in a page no rank holds, unless past topkLength", () => {
    const fn = "shardSparseIndicesHost";
    const plan = planDcpShards({ cacheSeqlens: Int32Array.of(2), ranks: 2, interleave: 2, pageSize: 2 });
    const map = dcpPageMapFromRequests(plan, { blockTable: Int32Array.of(1), numPages: 3 });
    const indices = Int32Array.of(3, 4); // page 1 (owned), page 2 (no rank)
    throwsArgument(() => shardSparseIndicesHost(map, { indices, sQ: 1, topk: 2 }), fn, "indices");
    const [r0, r1] = shardSparseIndicesHost(map, { indices, sQ: 1, topk: 2, topkLength: Int32Array.of(1) });
    assert.deepEqual([...r0], [1, -1]);
    assert.deepEqual([...r1], [-1, -1]);
    throwsArgument(() => shardSparseIndicesHost(map, { indices: Int32Array.of(1, 2, 3), sQ: 1, topk: 2 }), fn, "indices");
    throwsArgument(() => shardSparseIndicesHost(map, { indices, sQ: 0, topk: 2 }), fn, "sQ");
    throwsArgument(() => shardSparseIndicesHost(map, { indices, sQ: 1, topk: 2, topkLength: Int32Array.of(1, 1) }), fn, "topkLength");
    throwsArgument(() => shardSparseIndicesHost({} as never, { indices, sQ: 1, topk: 2 }), fn, "pageMap");
  });

  test("shardSparseCacheHost() copies each owned page, 656-byte tokens, across a padded block stride", () => {
    const pageBlockSize = 2;
    const pageBytes = pageBlockSize * 656;
    const stride = pageBytes + 656; // one padding token after each page
    const kCache = new Uint8Array(3 * stride);
    for (let p = 0; p < 3; p++) kCache.fill(p + 1, p * stride, p * stride + pageBytes);
    const map = dcpPageMapRoundRobin({ numPages: 3, ranks: 2, pageBlockSize });
    const [r0, r1] = shardSparseCacheHost(map, { kCache, blockStrideBytes: stride, fill: 0xff });
    assert.equal(r0.length, 2 * pageBytes);
    assert.ok(r0.subarray(0, pageBytes).every((x) => x === 1));
    assert.ok(r0.subarray(pageBytes).every((x) => x === 3));
    assert.equal(r1.length, pageBytes);
    assert.ok(r1.every((x) => x === 2));
    const plan = planDcpShards({ cacheSeqlens: Int32Array.of(2), ranks: 2, interleave: 2, pageSize: 2 });
    const [o0, o1] = shardSparseCacheHost(dcpPageMapFromRequests(plan, { blockTable: Int32Array.of(2), numPages: 3 }), { kCache, blockStrideBytes: stride, fill: 0xff });
    assert.ok(o0.every((x) => x === 3));
    assert.ok(o1.every((x) => x === 0xff)); // an empty rank keeps one poisoned page
    throwsArgument(() => shardSparseCacheHost(map, { kCache: kCache.subarray(0, 2 * stride), blockStrideBytes: stride }), "shardSparseCacheHost", "kCache");
    throwsArgument(() => shardSparseCacheHost(map, { kCache, blockStrideBytes: 10 }), "shardSparseCacheHost", "blockStrideBytes");
  });
});
