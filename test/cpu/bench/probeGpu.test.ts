import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { gitCommit } from "../../../src/bench/gitCommit.js";
import { probeGpu } from "../../../src/bench/probeGpu.js";

test("probeGpu() turns a bad ordinal into a reason instead of throwing", () => {
  const p = probeGpu(-1);
  assert.equal(p.ok, false);
  assert.match(!p.ok ? p.reason : "", /ordinal': expected a non-negative integer, got -1/);
});

test("probeGpu() answers with a Hopper device or a reason, never an exception", () => {
  const p = probeGpu();
  if (p.ok) assert.equal(p.device.isHopper, true);
  else assert.ok(p.reason.length > 10, p.reason);
});

test("gitCommit() reads HEAD in this checkout, says unknown outside one, and honours FLASHMLA_COMMIT", () => {
  const here = gitCommit(undefined, {});
  assert.ok(/^[0-9a-f]{40}$/.test(here.commit) || here.commit === "unknown", here.commit);
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-nogit-"));
  try {
    assert.deepEqual(gitCommit(dir, {}), { commit: "unknown" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  assert.deepEqual(gitCommit(dir, { FLASHMLA_COMMIT: " abc123 " }), { commit: "abc123" });
});
