import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { CeilingsCache, ceilingsCacheFile, type CeilingsRecord } from "../../../src/bench/CeilingsCache.js";
import { timingStats } from "../../../src/bench/timingStats.js";

function record(gpuName: string, driverVersion: string, gemmTflops: number): CeilingsRecord {
  const t = timingStats([100, 101, 102]);
  return {
    gpuName, driverVersion, measuredAt: "2026-11-30T00:00:00.000Z", copyGbPerS: 4174, readGbPerS: 4500, gemmTflops,
    detail: { copyBytes: 2 << 30, readBytes: 1 << 30, wgmmaFlop: 1e12, copyUs: t, readUs: t, wgmmaUs: t },
  };
}

function tempDir(): string {
  return mkdtempSync(path.join(os.tmpdir(), "flashmla-cache-"));
}

test("ceilingsCacheFile() honours FLASHMLA_CACHE_DIR, then XDG_CACHE_HOME, then ~/.cache", () => {
  assert.equal(ceilingsCacheFile({ FLASHMLA_CACHE_DIR: "/x/y" }), path.join("/x/y", "ceilings.json"));
  assert.equal(ceilingsCacheFile({ XDG_CACHE_HOME: "/c" }), path.join("/c", "flashmla-ts", "ceilings.json"));
  assert.equal(ceilingsCacheFile({}), path.join(os.homedir(), ".cache", "flashmla-ts", "ceilings.json"));
});

test("CeilingsCache keeps one record per GPU name and driver version", () => {
  const dir = tempDir();
  try {
    const cache = new CeilingsCache(path.join(dir, "sub", "ceilings.json"));
    assert.equal(cache.get("NVIDIA H200", "580.159.04"), undefined);
    cache.put(record("NVIDIA H200", "580.159.04", 800));
    cache.put(record("NVIDIA H200", "575.1", 790));
    cache.put(record("NVIDIA H100 80GB HBM3", "580.159.04", 700));
    cache.put(record("NVIDIA H200", "580.159.04", 810));
    assert.equal(cache.get("NVIDIA H200", "580.159.04")?.gemmTflops, 810);
    assert.equal(cache.get("NVIDIA H200", "575.1")?.gemmTflops, 790);
    assert.equal(cache.all().length, 3);
    // A second instance reads what the first wrote.
    assert.equal(new CeilingsCache(cache.file).get("NVIDIA H100 80GB HBM3", "580.159.04")?.gemmTflops, 700);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("CeilingsCache reads a damaged file as empty and replaces it on put", () => {
  const dir = tempDir();
  try {
    const file = path.join(dir, "ceilings.json");
    writeFileSync(file, "{ not json");
    const cache = new CeilingsCache(file);
    assert.equal(cache.get("NVIDIA H200", "1"), undefined);
    cache.put(record("NVIDIA H200", "1", 777));
    assert.equal(JSON.parse(readFileSync(file, "utf8")).entries["NVIDIA H200|1"].gemmTflops, 777);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("CeilingsCache ignores entries without positive figures", () => {
  const dir = tempDir();
  try {
    const file = path.join(dir, "ceilings.json");
    writeFileSync(file, JSON.stringify({ version: 1, entries: { "G|1": { ...record("G", "1", 0) } } }));
    assert.equal(new CeilingsCache(file).get("G", "1"), undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
