import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { config } from "../../../src/config.js";

// dist/test/cpu/cli -> dist/src/cli/cli.js
const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src/cli/cli.js");

function flashmla(args: string[]): string {
  const r = spawnSync(process.execPath, [cli, ...args], {
    env: { ...process.env, FLASHMLA_LIBCUDA: "/nonexistent/flashmla-test/libcuda.so.1", FLASHMLA_CACHE_DIR: "/nonexistent/flashmla-test-cache" },
    encoding: "utf8",
  });
  return r.stdout + r.stderr;
}

test("help texts and outputs cite only files the user has: no BENCH.md, and every named document exists", () => {
  const texts = [
    ...["", "info", "roofline", "ceilings", "bench", "dcp-bench", "check", "start"].map((c) => flashmla(c === "" ? ["--help"] : [c, "--help"])),
    flashmla(["bench", "--list"]),
    flashmla(["roofline", "--case", "dense-b1"]),
    flashmla(["roofline", "--case", "sparse-v32", "--json"]),
    flashmla(["bench"]),
  ];
  for (const t of texts) {
    assert.doesNotMatch(t, /BENCH\.md/, t.slice(0, 200));
    for (const [file] of t.matchAll(/\b(?:docs\/[\w.-]+\.md|README\.md|kernels\/[\w./-]+\.cu)\b/g)) {
      assert.ok(existsSync(path.join(config.packageRoot, file)), `${file} (cited in: ${t.slice(0, 80)}…) exists`);
    }
  }
  // The roofline help says what the formulas are instead of pointing elsewhere for them.
  assert.match(texts[2], /dense +FLOP = 2·b·h_q·s_q·s̄·\(576 \+ 512\)/);
  assert.match(texts[2], /docs\/dense-decode\.md/);
});
