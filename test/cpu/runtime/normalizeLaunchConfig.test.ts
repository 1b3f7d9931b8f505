import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { normalizeLaunchConfig, type LaunchConfig } from "../../../src/runtime/normalizeLaunchConfig.js";

test("normalizeLaunchConfig() expands numbers to [n, 1, 1] and fills defaults", () => {
  assert.deepEqual(normalizeLaunchConfig("k", { grid: 132, block: 256 }), {
    grid: [132, 1, 1],
    block: [256, 1, 1],
    sharedMemBytes: 0,
    cluster: undefined,
    pdl: false,
  });
  assert.deepEqual(normalizeLaunchConfig("k", { grid: [4, 2, 8], block: [128, 3, 1], sharedMemBytes: 200_000, cluster: [2, 1, 1], pdl: true }), {
    grid: [4, 2, 8],
    block: [128, 3, 1],
    sharedMemBytes: 200_000,
    cluster: [2, 1, 1],
    pdl: true,
  });
});

test("normalizeLaunchConfig() rejects bad shapes, naming the kernel and the field", () => {
  const bad: [Partial<LaunchConfig>, string, RegExp][] = [
    [{ grid: 0 }, "grid", /positive integer/],
    [{ grid: [1, 2] as unknown as [number, number, number] }, "grid", /\[x, y, z\]/],
    [{ grid: [1, 65536, 1] }, "grid", /at most \[2147483647, 65535, 65535\]/],
    [{ block: 1025 }, "block", /at most \[1024, 1024, 64\]/],
    [{ block: [32, 32, 2] }, "block", /at most 1024 threads per block, got \[32, 32, 2\] = 2048/],
    [{ block: 1.5 }, "block", /positive integer/],
    [{ sharedMemBytes: -1 }, "sharedMemBytes", /non-negative integer/],
    [{ grid: [3, 1, 1], cluster: [2, 1, 1] }, "cluster", /extents dividing the grid \[3, 1, 1\], got \[2, 1, 1\]/],
    [{ cluster: [0, 1, 1] }, "cluster", /positive integer/],
    [{ pdl: 1 as unknown as boolean }, "pdl", /a boolean/],
  ];
  for (const [patch, field, message] of bad) {
    const cfg = { grid: 4, block: 128, ...patch } as LaunchConfig;
    assert.throws(() => normalizeLaunchConfig("mla_combine_bf16", cfg), (e: unknown) => {
      assert.ok(e instanceof ArgumentError, field);
      assert.match(e.message, new RegExp(`^Kernel\\(mla_combine_bf16\\)\\.launch\\(\\): argument '${field}': `));
      assert.match(e.message, message);
      return true;
    });
  }
});
