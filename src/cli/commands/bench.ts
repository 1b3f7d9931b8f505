import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Command, Option } from "commander";
import { analysisGpu } from "../../bench/analysisGpu.js";
import { BENCH_CASES, benchCaseByName, caseBound, type BenchCase } from "../../bench/cases.js";
import { BenchProgress, progressMode } from "../../bench/BenchProgress.js";
import { benchRecord, ceilingsLine, type BenchRecord } from "../../bench/benchRecord.js";
import { benchRooflineSvg } from "../../bench/benchRooflineSvg.js";
import { benchTable } from "../../bench/benchTable.js";
import { CeilingsCache } from "../../bench/CeilingsCache.js";
import { cliIo, type CliIo } from "../../bench/cliIo.js";
import { gitCommit } from "../../bench/gitCommit.js";
import { gpuEnvironment } from "../../bench/gpuEnvironment.js";
import { HEADLINE_CASES } from "../../bench/headlineCases.js";
import { probeGpu, type GpuProbe } from "../../bench/probeGpu.js";
import { resolveCeilings } from "../../bench/resolveCeilings.js";
import { benchCaseKernel } from "../../bench/benchCaseKernel.js";
import { runBenchCase, type BenchCaseResult } from "../../bench/runBenchCase.js";
import { CROSSOVER_PARTNER, crossoverGain, crossoverGainText, wantsCrossoverGain, type CrossoverGain } from "../../bench/crossoverGain.js";
import { chooseKernel } from "../../mla/chooseKernel.js";
import { gpuSpecFromName, referenceCeiling, type Ceiling } from "../../roofline/gpus.js";
import { ridgePoint } from "../../roofline/roofline.js";
import type { Device } from "../../runtime/Device.js";
import { Stream } from "../../runtime/Stream.js";
import { CASE_LIST_HINT, unknownCaseFailure } from "../caseNames.js";
import { FAILURE_EXIT_CODE, USAGE_EXIT_CODE, reportCommanderErrors, reportFailure, type CliFailure } from "../cliErrors.js";
import { intAtLeast, nonNegativeInteger } from "../options.js";

export { FAILURE_EXIT_CODE };

/** What the GPU commands (bench, ceilings, check, start) need from outside; tests inject these. */
export interface GpuCommandDeps {
  /** Finds the GPU. @default probeGpu (the driver, device FLASHMLA_DEVICE, Hopper only) */
  probeGpu?: () => GpuProbe;
  /** Ends the process with a status. @default process.exit */
  exit?: (code: number) => never;
  /** Where measured ceilings are kept. @default new CeilingsCache() (FLASHMLA_CACHE_DIR) */
  cache?: CeilingsCache;
  /** Draw progress bars on stderr when it is a terminal. @default true */
  progress?: boolean;
}

interface BenchOptions {
  case?: string[];
  all?: boolean;
  iters: number;
  seed: number;
  json?: string | true;
  svg?: string | true;
  freshCeilings?: boolean;
  list?: boolean;
}

const EXAMPLES = `
Examples:
  The headline cases (what npm start runs on a GPU):
    $ flashmla bench
  Two cases, 100 timed calls each:
    $ flashmla bench --case dense-compute dense-b1 --iters 100
  Every case, with the roofline plot and the JSON record under bench/results/:
    $ flashmla bench --all --svg --json bench/results/h200.json
  FlashMLA's performance grid only (16 cases):
    $ flashmla bench --case dense-grid
  The sparse FP8 cases:
    $ flashmla bench --case sparse-v32 sparse-v32-h64 sparse-long-topk sparse-h16
  DeepSeek-V4's MODEL1 cases (8: two caches in one softmax):
    $ flashmla bench --case v4
  Dense decode at DeepSeek-V4's head (d_qk 512):
    $ flashmla bench --case dense-compute-d512
  The JSON record on stdout, for scripts:
    $ flashmla bench --case dense-mem-h16 --json
  What can be run:
    $ flashmla bench --list

The cases (--list shows each shape): FlashMLA's benchmark shapes at b = 128 (compute-bound at 128
heads, memory-bound at 16 and 64, FlashMLA's 16-case dense grid), dense-compute's shape at DeepSeek-V4's
head, d_qk 512 (dense-compute-d512, not a headline case), one 32K request (dense-b1), an
uneven batch (dense-uneven), short contexts (dense-short-h16), DeepSeek V3.2's sparse FP8 decode
at 128, 64 and 16 heads (topk 2048, and 32768 for sparse-long-topk), long contexts of few requests
(the long group: 16K-128K tokens, MTP, 16 heads), and DeepSeek-V4's sparse decode over the MODEL1
cache (the v4 group: FlashMLA's six MODEL1 cases, two caches in one softmax, and 16 and 32 heads).
Most carry FlashMLA's time on an H200 under this harness and our targets (first bar, goal).
Each case: ≥ 4 input sets built on the GPU (together well over the L2) writing one out and lse (as
FlashMLA's harness does), warm-up, then the whole call (main kernel + combine) between CUDA events,
median of --iters; its output is checked against the float64 CPU reference on sampled rows. Sparse
cases use FlashMLA's benchmark data (distinct random
indices, attn_sink on, softmax scale 576^-0.55), count N_unique from the indices drawn, quote
sparse-h16 by its FP8 cache read and print the seed's cycle budget; the v4 cases use FlashMLA's MODEL1
test data (each cache its own lengths, pages and indices; softmax scale 512^-0.55) and count N and
N_unique over both caches, with the seed's cycle budget at MODEL1's dims (512 + 512, 448 quantized:
32 MMA against 43.75 dequant clk per token at 64 heads). Every case runs the kernel
flashMlaWithKvcache chooses for its shape (--list names it); V3.2's 128-head sparse cases, which h128x
serves, are timed again with m64 for the measured crossover gain (m64 µs / h128x µs). The roofs are this
GPU's ceilings (\`flashmla ceilings\`, cached per GPU and driver); the table, the record and the plot all
use them, and the bound is the roof the cost model says binds under them (\`flashmla roofline\`).
With --json and no FILE, stdout is one JSON document: the record, or { "error": … } on a failure.
Exit status: 0 ok, 1 a check failed or no GPU, ${USAGE_EXIT_CODE} bad command line.`;

/**
 * Adds `bench` to `program`: times named cases with the kernel flashMlaWithKvcache chooses and prints
 * a table, optionally a JSON record and an SVG roofline plot.
 */
export function registerBenchCommand(program: Command, deps: GpuCommandDeps = {}): Command {
  const exit = deps.exit ?? ((code: number): never => process.exit(code));
  const cmd = program
    .command("bench")
    .description("Time named MLA decode cases on the GPU through flashMlaWithKvcache: µs, TFLOPS, GB/s, % of the measured ceiling, FlashMLA's figure, targets")
    .addOption(new Option("--case <names...>", "cases to run (names from --list, comma-separated or repeated; dense-grid = its 16 cases, long = its 6, v4 = its 8)"))
    .addOption(new Option("--all", "run every case"))
    .addOption(new Option("--iters <n>", "timed calls per case (median of these; at least 20)").argParser(intAtLeast(20)).default(40))
    .addOption(new Option("--seed <n>", "seed of the lengths, block tables and data").argParser(nonNegativeInteger).default(1))
    .addOption(new Option("--json [file]", "write the JSON record to FILE (without FILE: print it instead of the table)"))
    .addOption(new Option("--svg [file]", "write the roofline plot (default file: bench/results/bench-<gpu>-<time>.svg)"))
    .addOption(new Option("--fresh-ceilings", "measure the ceilings again instead of reading the cache"))
    .addOption(new Option("--list", "list the cases and the kernel that serves each, then exit"))
    .addHelpText("after", EXAMPLES);
  reportCommanderErrors(cmd, exit, "bench");

  cmd.action(async (opts: BenchOptions) => {
    const io = cliIo(cmd);
    const json = opts.json !== undefined;
    const fail = (f: CliFailure): never => exit(reportFailure(io, "bench", f, json));
    if (opts.list === true) {
      io.out(listText(deps.cache ?? new CeilingsCache()));
      return;
    }
    if (opts.all === true && opts.case !== undefined) fail({ kind: "usage", message: "give --case or --all, not both" });
    const cases = opts.all === true ? [...BENCH_CASES] : resolveCases(opts.case ?? [...HEADLINE_CASES], fail);

    const probe = (deps.probeGpu ?? probeGpu)();
    if (!probe.ok) return fail(noGpuFailure("bench", probe.reason));
    const code = guarded(io, "bench", json, () =>
      runBench({ cases, iters: opts.iters, seed: opts.seed, json: opts.json, svg: opts.svg, freshCeilings: opts.freshCeilings === true }, probe.device, io, deps, "bench"),
    );
    if (code !== 0) exit(code);
  });
  return cmd;
}

/** What {@link runBench} runs. */
export interface BenchRequest {
  cases: readonly BenchCase[];
  iters: number;
  seed: number;
  /** A file for the JSON record, or true for stdout (then no table). */
  json?: string | true;
  /** A file for the SVG plot, or true for the default file. */
  svg?: string | true;
  freshCeilings?: boolean;
}

/**
 * Runs `req` on `device`: ceilings (cached or measured), every case, then the table, the record and
 * the plot. Returns the exit status: 1 when a case's check failed or it threw, else 0. Shared by
 * `flashmla bench` and `flashmla start`.
 */
export function runBench(req: BenchRequest, device: Device, io: CliIo, deps: GpuCommandDeps, commandName: string): number {
  const c = io.colors;
  const progress = new BenchProgress(progressMode(deps.progress !== false), io.err);
  const env = gpuEnvironment(device);
  const commit = gitCommit();
  const stream = Stream.create(device.ordinal);
  const results: BenchCaseResult[] = [];
  const partners: BenchCaseResult[] = [];
  const gains: CrossoverGain[] = [];
  let record: BenchRecord;
  try {
    progress.start(120, "ceilings");
    const ceilings = resolveCeilings(device, env, { fresh: req.freshCeilings, cache: deps.cache, onProgress: () => progress.tick() });
    const spec = gpuSpecFromName(env.name);
    // The run's one set of roofs: the table's "% ceil" and bound, the record and the plot all use it.
    const reference: Ceiling = {
      label: "measured",
      tflops: ceilings.record.gemmTflops,
      gbPerS: ceilings.record.readGbPerS,
      ridge: ridgePoint(ceilings.record.gemmTflops, ceilings.record.readGbPerS),
    };

    const perCase = req.iters + 2;
    progress.start(req.cases.length * perCase, req.cases[0]?.name ?? "");
    for (const bc of req.cases) {
      let ticked = 0;
      const r = runBenchCase(bc, {
        device,
        stream,
        roofs: reference,
        iters: req.iters,
        seed: req.seed,
        onStage: (stage) => {
          if (stage === "check") (ticked++, progress.tick(1, `${bc.name}: check`));
          else progress.label(`${bc.name}: ${stage}`);
        },
        onIteration: () => (ticked++, progress.tick()),
      });
      progress.tick(Math.max(0, perCase - ticked), bc.name);
      results.push(r);
    }
    // The measured gain of crossover beside the cycle budget: each case h128x served is timed again with
    // m64 (checked like any case).
    for (const [i, r] of results.entries()) {
      if (!wantsCrossoverGain(r)) continue;
      progress.start(perCase, `${r.case}: ${chooseKernel(req.cases[i], CROSSOVER_PARTNER)} (crossover gain)`);
      const other = runBenchCase(req.cases[i], { overrides: CROSSOVER_PARTNER, device, stream, roofs: reference, iters: req.iters, seed: req.seed, onIteration: () => progress.tick() });
      partners.push(other);
      const gain = crossoverGain(r, other);
      if (gain !== undefined) gains.push(gain);
    }
    progress.stop();

    const kernelLabel = [...new Set(results.map((r) => r.kernel))].join(" + ") || "no kernel";
    record = benchRecord({
      gpu: env,
      commit,
      kernel: kernelLabel,
      ceilings: ceilings.record,
      ceilingsSource: ceilings.source,
      reference,
      ...(spec !== undefined ? { datasheet: { tflops: spec.datasheetTflops, gbPerS: spec.datasheetGbPerS } } : {}),
      iters: req.iters,
      seed: req.seed,
      results,
      crossoverGains: gains,
    });
    // Files first: a failure to write one must not follow a record already printed on stdout,
    // which with --json has to stay one JSON document.
    const wrote: string[] = [];
    if (typeof req.json === "string") wrote.push(writeFile(req.json, `${JSON.stringify(record, null, 2)}\n`));
    if (req.svg !== undefined) {
      const file = req.svg === true ? path.join("bench", "results", `bench-${slug(env.name)}-${record.createdAt.replace(/[:.]/g, "-")}.svg`) : req.svg;
      wrote.push(writeFile(file, benchRooflineSvg(record)));
    }
    if (req.json === true) {
      io.out(`${JSON.stringify(record, null, 2)}\n`);
      for (const f of wrote) io.err(`wrote ${f}\n`);
    } else {
      const clock = env.smClockMhzNow !== undefined ? `, SM clock now ${env.smClockMhzNow} MHz` : "";
      io.out(
        `${c.bold(`flashmla ${commandName}: flashMlaWithKvcache (${kernelLabel}) on ${env.name}`)} (${env.smCount} SMs, max SM clock ${env.maxSmClockMhz} MHz${clock}), ` +
          `driver ${env.driverVersion}, CUDA ${env.cudaDriverVersion}, commit ${commit.commit === "unknown" ? "unknown" : commit.commit.slice(0, 10)}${commit.dirty === true ? "+dirty" : ""}\n`,
      );
      io.out(`${ceilingsLine(record)}\n`);
      if (ceilings.cacheError !== undefined) io.out(c.dim(`note: the ceilings could not be cached: ${ceilings.cacheError}\n`));
      io.out(benchTable(results, { colors: c }));
      for (const g of gains) io.out(`${crossoverGainText(g)}\n`);
      for (const f of wrote) io.out(`wrote ${f}\n`);
    }
  } finally {
    progress.stop();
    stream.dispose();
  }
  const failed = [...results, ...partners].filter((r) => r.status === "check-failed" || r.status === "error");
  if (failed.length > 0) {
    io.err(`flashmla ${commandName}: ${failed.length} case(s) failed: ${failed.map((r) => `${r.case} with ${r.kernel} (${r.status})`).join(", ")}\n`);
    return FAILURE_EXIT_CODE;
  }
  return 0;
}

/**
 * Runs a command's work and turns an unexpected error (a CUDA error, kernels not built) into a
 * failure report (stderr, and { "error" } on stdout for --json) and exit status 1 instead of a stack
 * trace.
 */
export function guarded(io: CliIo, command: string, json: boolean, work: () => number): number {
  try {
    return work();
  } catch (e) {
    return reportFailure(io, command, { kind: "error", message: e instanceof Error ? e.message : String(e) }, json);
  }
}

/** The failure of a GPU command run where no usable GPU is, with what works without one. */
export function noGpuFailure(command: string, reason: string): CliFailure {
  return {
    kind: "no-gpu",
    message: reason,
    detail: `flashmla ${command} needs an NVIDIA Hopper GPU (H100, H200, H800). Without one, \`flashmla roofline --case NAME\` gives the analysis and \`flashmla start\` runs the CPU reference.`,
  };
}

function resolveCases(names: readonly string[], fail: (f: CliFailure) => never): BenchCase[] {
  const out: BenchCase[] = [];
  for (const name of names.flatMap((n) => n.split(",")).map((n) => n.trim()).filter((n) => n !== "")) {
    const one = benchCaseByName(name);
    const group = BENCH_CASES.filter((x) => x.group === name);
    const found = one !== undefined ? [one] : group;
    if (found.length === 0) fail(unknownCaseFailure(name));
    for (const c of found) if (!out.includes(c)) out.push(c);
  }
  if (out.length === 0) fail({ kind: "usage", message: "no case given", hint: CASE_LIST_HINT });
  return out;
}

/**
 * `bench --list`: every case with the kernel that serves it and the roof that binds it under the
 * H200's measured roofs (this machine's when it has measured them), as `flashmla roofline` says.
 */
function listText(cache: CeilingsCache): string {
  const roofs = referenceCeiling(analysisGpu("h200", cache).spec);
  const lines = ["Cases, each with the kernel flashMlaWithKvcache runs for it and the roof that binds it on an H200:"];
  for (const c of BENCH_CASES) {
    const lens = c.seqlens.kind === "fixed" ? `s_k ${c.seqlens.s_k}` : c.seqlens.kind === "varlen" ? `s_k ~${c.seqlens.mean} varlen` : `s_k ${c.seqlens.values.join("/")}`;
    const e = c.model1?.extra;
    const extra = e === undefined ? "" : ` + extra s_k ~${e.s_k} topk ${e.topk}${e.topkLengthRandom === true ? ` (valid U[0, ${e.topk}])` : ""}`;
    const kernel = benchCaseKernel(c);
    const head = HEADLINE_CASES.includes(c.name) ? " [headline]" : "";
    lines.push(`  ${c.name.padEnd(28)} ${c.kind.padEnd(6)} ${kernel.padEnd(19)} b=${c.b} h_q=${c.h_q} s_q=${c.s_q} ${lens}${c.causal ? " causal" : ""}${c.d_qk !== undefined ? ` d_qk ${c.d_qk}` : ""}${c.topk !== undefined ? ` topk ${c.topk}` : ""}${extra}  (${caseBound(c, roofs)})${head}`);
  }
  lines.push("[headline]: what flashmla start (npm start) runs. Any case in detail: flashmla roofline --case NAME");
  return `${lines.join("\n")}\n`;
}

function writeFile(file: string, text: string): string {
  mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  writeFileSync(file, text);
  return file;
}

function slug(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "") || "gpu";
}



