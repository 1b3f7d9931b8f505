import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// dist/test/cpu/cli -> dist/test/helpers/gpu.js
const helper = pathToFileURL(path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../helpers/gpu.js")).href;

/** The environment of a fresh `npm test` without a driver, outside this test runner. */
function env(): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, FLASHMLA_LIBCUDA: "/nonexistent/flashmla-test/libcuda.so.1" };
  // Inherited, these would make the nested runner report to this one instead of running on its own.
  delete e.NODE_TEST_CONTEXT;
  delete e.FLASHMLA_REQUIRE_GPU;
  return e;
}

function notices(text: string): number {
  return (text.match(/GPU tests SKIPPED/g) ?? []).length;
}

test("a test run without a GPU prints the GPU-suite skip warning once, not once per file or test", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-skip-notice-"));
  try {
    const files = ["a", "b", "c", "d"].map((n) => {
      const f = path.join(dir, `${n}.test.mjs`);
      writeFileSync(f, `import { describeGpu, testGpu } from ${JSON.stringify(helper)};\ntestGpu("${n} one", () => {});\ntestGpu("${n} two", () => {});\ndescribeGpu("${n} suite", () => {});\n`);
      return f;
    });
    // Files run in parallel too: the marker is created exclusively, so two cannot both print.
    for (const concurrency of ["1", "4"]) {
      const r = spawnSync(process.execPath, ["--test", `--test-concurrency=${concurrency}`, "--test-reporter=tap", ...files], { env: env(), encoding: "utf8", timeout: 60_000 });
      const out = r.stdout + r.stderr;
      assert.equal(r.status, 0, out);
      assert.equal(notices(out), 1, out);
      assert.match(out, /# skipped 12/);
      // Each skipped test names the cause in a few words; the notice has the whole reason and the remedy.
      assert.match(out, /# SKIP SKIPPED: no GPU: \/nonexistent\/flashmla-test\/libcuda\.so\.1 not found: no NVIDIA driver on this machine\n/);
      assert.match(out, /FLASHMLA_REQUIRE_GPU=1/);
    }
    // A file run on its own is its own run: it warns.
    const alone = spawnSync(process.execPath, [files[0]], { env: env(), encoding: "utf8", timeout: 60_000 });
    assert.equal(notices(alone.stdout + alone.stderr), 1, alone.stdout + alone.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
