#!/usr/bin/env node
// npm pack / npm publish run this first (package.json "prepack"): the package promises compiled kernels,
// so a tarball is made only after the library is built afresh and the production cubins are built (or
// found up to date) into dist/kernels. Without nvcc it fails, naming what is missing: a tarball without
// kernels must never be made by accident.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MIN_NVCC, parseNvccRelease } from "./buildKernels.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const kernelDir = path.join(root, "dist", "kernels");
const nvcc = process.env.NVCC ?? "nvcc";
const need = `nvcc >= ${MIN_NVCC.major}.${MIN_NVCC.minor}`;

function fail(message) {
  console.error(`prepack: ${message}\nprepack: no tarball was made.`);
  process.exit(1);
}

let versionText;
try {
  versionText = execFileSync(nvcc, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
} catch (e) {
  const why = e?.code === "ENOENT" ? `'${nvcc}' not found` : `'${nvcc} --version' failed`;
  fail(`${why}. The package ships the compiled CUDA kernels, so packing builds them: put the CUDA toolkit's ${need} on PATH, or set NVCC=/path/to/nvcc.`);
}
const release = parseNvccRelease(versionText);

// A fresh folder: a source deleted since the last build would otherwise leave its .js (and the dev
// build's source maps) behind to ship.
rmSync(path.join(root, "dist", "src"), { recursive: true, force: true });
console.error("prepack: tsc -p tsconfig.build.json (dist/src, no source maps)");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
// Everything on stderr: `npm pack` prints the tarball's name on stdout, and scripts read it there.
let r = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.build.json")], { cwd: root, stdio: ["ignore", 2, 2] });
if (r.status !== 0) fail("tsc failed (above).");

// The production build: the default folder and flags, whatever this shell has set for experiments.
const env = { ...process.env };
delete env.FLASHMLA_KERNEL_DIR;
delete env.NVCC_EXTRA_FLAGS;
console.error(`prepack: the CUDA kernels (${release ? `nvcc ${release.major}.${release.minor}` : nvcc}, --strict) into dist/kernels`);
r = spawnSync(process.execPath, [path.join(root, "scripts", "buildKernels.mjs"), "--strict"], { cwd: root, env, stdio: ["ignore", 2, 2] });
if (r.status !== 0) fail("the kernel build failed (above).");

// What ships: manifest.json and each cubin it lists. buildKernels keeps kernels/testing/ out of it; a
// listed cubin that is missing would make every install fail at its first GPU call.
const manifest = JSON.parse(readFileSync(path.join(kernelDir, "manifest.json"), "utf8"));
const names = Object.keys(manifest.kernels ?? {});
if (names.length === 0) fail("dist/kernels/manifest.json lists no kernels.");
for (const name of names) {
  const source = String(manifest.kernels[name].source ?? "");
  if (source.startsWith("kernels/testing/")) fail(`dist/kernels/manifest.json lists the test-only ${name} (${source}).`);
  if (!existsSync(path.join(kernelDir, `${name}.cubin`))) fail(`dist/kernels/${name}.cubin is listed in manifest.json but missing.`);
}
console.error(`prepack: ${names.length} kernels ready in dist/kernels`);
