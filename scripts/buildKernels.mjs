#!/usr/bin/env node
// Builds every kernel source under kernels/ into dist/kernels/<name>.cubin for sm_90a with nvcc and writes
// dist/kernels/manifest.json: nvcc version, source and cubin hashes, and per function the registers,
// shared memory, stack and spills that ptxas -v reports. The sources under kernels/testing/ (loaded by
// the tests alone) go to dist/kernels/testing/ with a manifest of their own, so that the folder the
// package ships lists only what the library and the benchmark load.
// Usage: node scripts/buildKernels.mjs [--strict] [--force]
// --strict fails the build when any function spills, uses local memory, or has its wgmma serialized.
// A cubin whose source, headers, flags and nvcc are those its manifest entry records is kept, not
// rebuilt (the entry's hashes say so); --force rebuilds every one.
import { execFileSync, execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const kernelRoot = path.join(root, "kernels");
const outDir = path.resolve(process.env.FLASHMLA_KERNEL_DIR ?? path.join(root, "dist", "kernels"));
const testOutDir = path.join(outDir, "testing");
const strict = process.argv.includes("--strict");
const force = process.argv.includes("--force");
const nvcc = process.env.NVCC ?? "nvcc";
/** The oldest nvcc known to build the kernels (sm_90a wgmma, setmaxnreg and the PTX they use). */
export const MIN_NVCC = { major: 12, minor: 8 };

/**
 * The translation units: every .cu under kernels/ becomes one cubin. Its name is the file's, except for
 * instantiation units (kernels/<arch>/decode/<path>/inst/<variant>.cu), named <path>_<variant>
 * (dense_fast_bf16, sparse_m64_bf16): the file name is the variant, and a missing file is a variant that
 * does not exist.
 */
function sourceFiles(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (e.name.endsWith(".cu")) out.push(path.relative(kernelRoot, p));
  }
  return out.sort();
}
export function cubinName(src) {
  const parts = src.split(path.sep);
  const base = path.basename(src, ".cu");
  const inst = parts.lastIndexOf("inst");
  if (inst < 1) return base;
  const decode = parts.indexOf("decode");
  return [...parts.slice(decode + 1, inst), base].join("_");
}
/** Whether the tests alone load `src`'s cubin (kernels/testing/): it is built, but not shipped. */
export function isTestOnly(src) {
  return src.split(path.sep)[0] === "testing";
}
/** The CUDA release nvcc --version reports ("Cuda compilation tools, release 13.0, V13.0.48"), or undefined. */
export function parseNvccRelease(text) {
  const m = /release (\d+)\.(\d+)/.exec(text);
  return m ? { major: +m[1], minor: +m[2] } : undefined;
}
/**
 * Every translation unit under kernels/: its source, cubin name, the folder its cubin goes to, and the
 * hash of its source with every header (a header change rebuilds every unit). Throws when two units
 * would build the same cubin.
 */
export function kernelUnits(dir = outDir) {
  const headerHash = sha256(Buffer.concat(headerFiles(kernelRoot).map((h) => readFileSync(h))));
  const names = new Map();
  return sourceFiles(kernelRoot).map((src) => {
    const name = cubinName(src);
    if (names.has(name)) throw new Error(`buildKernels: ${src} and ${names.get(name)} would both build ${name}.cubin`);
    names.set(name, src);
    const sourceSha256 = sha256(Buffer.concat([readFileSync(path.join(kernelRoot, src)), Buffer.from(headerHash)]));
    return { src, name, dir: isTestOnly(src) ? path.join(dir, "testing") : dir, sourceSha256 };
  });
}

/**
 * The cubins of `dir` (and its testing/ folder) that do not match kernels/ as it is now: no manifest
 * entry, an entry built from other sources, or a missing file. Whatever nvcc and flags built them.
 */
export function staleKernels(dir = outDir) {
  const manifests = new Map();
  const entries = (folder) => {
    if (!manifests.has(folder)) {
      try {
        manifests.set(folder, JSON.parse(readFileSync(path.join(folder, "manifest.json"), "utf8")).kernels ?? {});
      } catch {
        manifests.set(folder, {});
      }
    }
    return manifests.get(folder);
  };
  return kernelUnits(dir)
    .filter((u) => entries(u.dir)[u.name]?.sourceSha256 !== u.sourceSha256 || !existsSync(path.join(u.dir, `${u.name}.cubin`)))
    .map((u) => u.name);
}

// NVCC_EXTRA_FLAGS adds flags for a build into another FLASHMLA_KERNEL_DIR (never for a shipped build).
const FLAGS = ["-O3", "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v", "-lineinfo",
  ...(process.env.NVCC_EXTRA_FLAGS ?? "").split(" ").filter(Boolean)];

function sha256(buf) {
  return createHash("sha256").update(buf).digest("hex");
}

function headerFiles(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...headerFiles(p));
    else if (/\.(cuh|h)$/.test(e.name)) out.push(p);
  }
  return out.sort();
}

/** Parses ptxas -v output into { fn: { registers, sharedBytes, stackBytes, spillStores, spillLoads } }. */
export function parsePtxasReport(text) {
  const fns = {};
  let current;
  for (const line of text.split("\n")) {
    let m = line.match(/Compiling entry function '([^']+)'/) ?? line.match(/Function properties for ([^\s:]+)/);
    if (m) {
      current = m[1];
      fns[current] ??= { registers: 0, sharedBytes: 0, stackBytes: 0, spillStores: 0, spillLoads: 0 };
      continue;
    }
    if (!current) continue;
    m = line.match(/(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads/);
    if (m) Object.assign(fns[current], { stackBytes: +m[1], spillStores: +m[2], spillLoads: +m[3] });
    m = line.match(/Used (\d+) registers/);
    if (m) fns[current].registers = +m[1];
    m = line.match(/(\d+) bytes smem/);
    if (m) fns[current].sharedBytes = +m[1];
  }
  // (C7520) "wgmma.mma_async instructions are serialized ... in the function 'name'": every wgmma then
  // waits for the previous one, about halving the tensor-core rate. Its line names the function.
  for (const m of text.matchAll(/C7520\)[^\n]*function '([^']+)'/g)) {
    fns[m[1]] ??= { registers: 0, sharedBytes: 0, stackBytes: 0, spillStores: 0, spillLoads: 0 };
    fns[m[1]].wgmmaSerialized = true;
  }
  return fns;
}

async function main() {
  let versionText;
  try {
    versionText = execFileSync(nvcc, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
  } catch {
    console.error(`buildKernels: '${nvcc}' not found. Install the CUDA toolkit (nvcc >= ${MIN_NVCC.major}.${MIN_NVCC.minor}) or set NVCC=/path/to/nvcc.`);
    process.exit(1);
  }
  const nvccVersion = versionText.split("\n").pop();
  const release = parseNvccRelease(versionText);
  if (release && (release.major < MIN_NVCC.major || (release.major === MIN_NVCC.major && release.minor < MIN_NVCC.minor))) {
    console.error(`buildKernels: ${nvcc} is CUDA ${release.major}.${release.minor}; the kernels need nvcc >= ${MIN_NVCC.major}.${MIN_NVCC.minor}. Install a newer CUDA toolkit or set NVCC=/path/to/nvcc.`);
    process.exit(1);
  }
  mkdirSync(testOutDir, { recursive: true });
  // The commit the sources came from (a GPU host may get the work tree with a stale or no .git: the
  // device script passes this on as FLASHMLA_COMMIT, so bench records name the right commit).
  let sourceCommit = "unknown";
  try {
    const head = execFileSync("git", ["rev-parse", "HEAD"], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim() !== "";
    sourceCommit = dirty ? `${head}+dirty` : head;
  } catch {
    // not a git checkout (an installed package): leave it unknown
  }
  const header = { arch: "sm_90a", nvccVersion, flags: FLAGS, builtAt: new Date().toISOString(), sourceCommit };
  const shipped = { dir: outDir, previous: previousEntries(outDir, header), manifest: { ...header, kernels: {} } };
  const testing = { dir: testOutDir, previous: previousEntries(testOutDir, header), manifest: { ...header, kernels: {} } };
  let failed = false;
  let kept = 0;
  // One nvcc per two cores, at least two and at most eight: each takes a core for ptxas and several GiB
  // for the dense units, and CI machines have two cores.
  const queue = kernelUnits();
  async function worker() {
    for (let unit; (unit = queue.shift()); ) {
      const { src, name, sourceSha256 } = unit;
      const srcPath = path.join(kernelRoot, src);
      const target = unit.dir === testOutDir ? testing : shipped;
      const manifest = target.manifest;
      const cubin = path.join(target.dir, `${name}.cubin`);
      const previous = target.previous[name];
      if (!force && previous?.sourceSha256 === sourceSha256 && existsSync(cubin) && sha256(readFileSync(cubin)) === previous.cubinSha256) {
        manifest.kernels[name] = previous;
        kept += 1;
        if (strict && Object.values(previous.functions ?? {}).some((r) => r.spillStores + r.spillLoads + r.stackBytes > 0 || r.wgmmaSerialized)) {
          failed = true;
          console.error(`buildKernels: ${name}.cubin (kept from the last build) spills or has its wgmma serialized; see its entry in manifest.json`);
        }
        continue;
      }
      const t0 = Date.now();
      let report;
      try {
        const { stderr, stdout } = await run(nvcc, [...FLAGS, "-o", cubin, srcPath], { cwd: path.dirname(srcPath), maxBuffer: 64 << 20 });
        report = stdout + stderr;
      } catch (e) {
        failed = true;
        console.error(`buildKernels: ${src} failed:\n${e.stderr ?? e.message}`);
        continue;
      }
      const functions = parsePtxasReport(report);
      manifest.kernels[name] = {
        source: `kernels/${src.split(path.sep).join("/")}`,
        sourceSha256,
        cubinSha256: sha256(readFileSync(cubin)),
        cubinBytes: statSync(cubin).size,
        functions,
      };
      for (const [fn, r] of Object.entries(functions)) {
        const spill = r.spillStores + r.spillLoads + r.stackBytes;
        let note = spill ? `  SPILLS/STACK: ${r.spillStores}B st, ${r.spillLoads}B ld, ${r.stackBytes}B stack` : "";
        if (r.wgmmaSerialized) note += "  WGMMA SERIALIZED (ptxas C7520)";
        console.log(`  ${name}:${fn}  regs ${r.registers}  smem ${r.sharedBytes}${note}`);
        if ((spill || r.wgmmaSerialized) && strict) failed = true;
      }
      console.log(`built ${name}.cubin (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    }
  }
  const workers = Math.max(2, Math.min(8, Math.floor(os.availableParallelism() / 2)));
  await Promise.all(Array.from({ length: workers }, () => worker()));
  for (const { dir, manifest } of [shipped, testing]) {
    // A cubin no source builds any more (a renamed or moved kernel) would otherwise linger beside the
    // manifest and ship with the package.
    for (const f of readdirSync(dir)) {
      if (f.endsWith(".cubin") && !(f.slice(0, -".cubin".length) in manifest.kernels)) rmSync(path.join(dir, f));
    }
    // Sorted: the workers finish in any order, and two builds of the same sources should read the same.
    manifest.kernels = Object.fromEntries(Object.entries(manifest.kernels).sort(([a], [b]) => (a < b ? -1 : 1)));
    writeFileSync(path.join(dir, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
  }
  if (kept > 0) console.log(`kept ${kept} cubin(s) built from the same sources, flags and nvcc (--force rebuilds them)`);
  if (failed) process.exit(1);
}

/**
 * The entries of `dir`'s manifest.json that a build with `header`'s nvcc and flags may keep; none when
 * the manifest is missing, unreadable, or from another nvcc or other flags.
 */
function previousEntries(dir, header) {
  try {
    const m = JSON.parse(readFileSync(path.join(dir, "manifest.json"), "utf8"));
    if (m.arch !== header.arch || m.nvccVersion !== header.nvccVersion || JSON.stringify(m.flags) !== JSON.stringify(header.flags)) return {};
    return m.kernels !== null && typeof m.kernels === "object" && !Array.isArray(m.kernels) ? m.kernels : {};
  } catch {
    return {};
  }
}

// Run as a script, not when imported for its helpers (scripts/ensureKernels.mjs, the tests).
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
