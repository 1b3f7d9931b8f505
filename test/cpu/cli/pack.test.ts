import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { config } from "../../../src/config.js";
import { readKernelManifest } from "../../../src/runtime/readVerifiedCubin.js";

const root = config.packageRoot;

/** The paths `npm pack` would put in the tarball (without the package/ prefix). */
function packedFiles(): string[] {
  const json = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], timeout: 60_000 });
  const [entry] = JSON.parse(json) as Array<{ files: Array<{ path: string }> }>;
  return entry.files.map((f) => f.path);
}

test("npm pack ships the compiled library, the CLI, the case table, the README, LICENSE and docs, not the tests", () => {
  const files = packedFiles();
  const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { bin: Record<string, string>; main: string; exports: Record<string, { types: string; default: string }> };
  for (const f of ["package.json", "README.md", "LICENSE", "docs/ARCHITECTURE.md", "dist/src/index.js", "dist/src/cli/cli.js", "dist/src/cli/commands/bench.js", "dist/src/bench/rooflineSvg.js", "dist/src/bench/cases.js", "dist/src/runtime/index.js"]) {
    assert.ok(files.includes(f), `${f} is packed`);
  }
  // The bin and main entries point at packed files.
  assert.ok(files.includes(path.normalize(pkg.bin.flashmla)), pkg.bin.flashmla);
  assert.ok(files.includes(path.normalize(pkg.main)), pkg.main);
  // Every subpath export ("." and "./runtime") points at packed files.
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    for (const file of [target.types, target.default]) assert.ok(files.includes(path.normalize(file)), `${subpath}: ${file}`);
  }
  assert.equal(files.filter((f) => f.startsWith("dist/test/")).length, 0);
  assert.equal(files.filter((f) => f.startsWith("test/") || f.startsWith("src/")).length, 0);
  // Source maps would point at .ts files the package does not ship; kernel sources, scripts and probes
  // are for building, which a user of the package does not do.
  assert.deepEqual(files.filter((f) => f.endsWith(".map")), []);
  assert.deepEqual(files.filter((f) => /^(kernels|scripts|bench|scratch)\//.test(f) || /\.(cu|cuh|patch|mjs|ts)$/.test(f) && !f.endsWith(".d.ts")), []);
});

test("package.json: npm pack builds the kernels first; Linux on x64 and arm64, Node >= 20; where it lives", () => {
  const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as Record<string, unknown> & { scripts: Record<string, string> };
  assert.equal(pkg.scripts.prepack, "node scripts/prepack.mjs");
  assert.match(pkg.scripts.prestart, /node scripts\/ensureKernels\.mjs$/);
  assert.match(pkg.scripts.pretest, /node scripts\/ensureKernels\.mjs$/);
  assert.deepEqual(pkg.os, ["linux"]);
  assert.deepEqual(pkg.cpu, ["x64", "arm64"]);
  assert.deepEqual(pkg.engines, { node: ">=20" });
  assert.equal(pkg.license, "MIT");
  assert.match(readFileSync(path.join(root, "LICENSE"), "utf8"), /^MIT License\n\nCopyright \(c\) 2026 the flashmla-ts authors\n/);
  assert.deepEqual(pkg.repository, { type: "git", url: "git+https://github.com/flashmla-ts/flashmla-ts.git" });
  assert.ok(Array.isArray(pkg.keywords) && pkg.keywords.includes("cuda"));
});

// What prepack builds is checked on the real tarball by .ci/pack-test.sh; this is the `files` side.
test("npm pack ships every cubin the kernel manifest lists, with the manifest, and not the test-only ones", { skip: !existsSync(path.join(config.kernelDir, "manifest.json")) && "kernels not built here (npm run build:kernels)" }, () => {
  const files = packedFiles();
  assert.ok(files.includes("dist/kernels/manifest.json"));
  const modules = readKernelManifest(config.kernelDir).map((k) => k.name);
  for (const name of ["ceilings", "bench_spin", "bench_fill"]) assert.ok(modules.includes(name), `${name} is built`);
  for (const name of modules) assert.ok(files.includes(`dist/kernels/${name}.cubin`), `dist/kernels/${name}.cubin is packed`);
  for (const name of ["dequant_selftest", "wgmma_probe_sm90"]) assert.ok(!modules.includes(name), `${name} is not in the shipped manifest`);
  assert.deepEqual(files.filter((f) => f.startsWith("dist/kernels/testing/")), []);
});

test("the CLI's runtime dependencies are declared in package.json", () => {
  const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  for (const dep of ["commander", "cli-table3", "cli-progress", "picocolors", "koffi", "d3-scale", "d3-shape"]) {
    assert.ok(pkg.dependencies[dep] !== undefined, `${dep} is a dependency`);
  }
});
