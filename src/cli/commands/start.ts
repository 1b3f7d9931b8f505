import { performance } from "node:perf_hooks";
import { Command, Option } from "commander";
import Table from "cli-table3";
import { targetCell } from "../../bench/benchTable.js";
import { benchCaseByName, benchCaseShape, type BenchCase } from "../../bench/cases.js";
import { cliIo, type CliIo } from "../../bench/cliIo.js";
import { HEADLINE_CASES } from "../../bench/headlineCases.js";
import { probeGpu } from "../../bench/probeGpu.js";
import { benchCaseKernel } from "../../bench/benchCaseKernel.js";
import { D_V } from "../../mla/contract/shape.js";
import { mlaDecodeReference, type ReferenceRow } from "../../mla/reference/mlaDecodeReference.js";
import { compareTensors } from "../../numeric/compare.js";
import { analysisGpu } from "../../bench/analysisGpu.js";
import { CeilingsCache } from "../../bench/CeilingsCache.js";
import { referenceCeiling } from "../../roofline/gpus.js";
import { mlaCost } from "../../roofline/mlaCost.js";
import { rooflineReport } from "../../roofline/rooflineReport.js";
import { guarded, runBench, type GpuCommandDeps } from "./bench.js";
import { makeDenseCase } from "../../testing/denseCase.js";
import { FAILURE_EXIT_CODE, USAGE_EXIT_CODE, reportCommanderErrors } from "../cliErrors.js";
import { fmt, intAtLeast } from "../options.js";

interface StartOptions {
  iters: number;
  json?: string | true;
  svg?: string | true;
}

const EXAMPLES = `
Examples:
  The main job (also \`npm start\`):
    $ flashmla start
  With the roofline plot of the run:
    $ flashmla start --svg

On a Hopper GPU: \`flashmla bench\` over the headline cases, each with the kernel flashMlaWithKvcache
chooses for it (flashmla bench --help says how it times, --list shows the shapes):
  ${HEADLINE_CASES.filter((n) => !n.startsWith("sparse")).join(", ")},
  ${HEADLINE_CASES.filter((n) => n.startsWith("sparse")).join(", ")}
Elsewhere: the float64 CPU reference on a small dense case (timed, checked against a second run),
the roofline of the headline cases on an H200 with the kernel that would serve each, and a line
saying why no GPU was found (flashmla info says more).
With --json and no FILE, stdout is one JSON document: the results, or { "error": … } on a failure.
Exit status: 0 ok, 1 a check failed or the run failed, ${USAGE_EXIT_CODE} bad command line.`;


/** The small case the CPU reference runs without a GPU: MTP with causal masking and uneven lengths. */
const CPU_CASE = { seed: 1, b: 4, s_q: 2, h_q: 16, h_kv: 1, seqlens: [1024, 700, 333, 64], causal: true, dtype: "bf16" } as const;

/**
 * Adds `start` to `program` (what `npm start` runs): the benchmark of the headline cases on a
 * Hopper GPU; without one, the CPU reference on a small case and the roofline of the headline cases.
 */
export function registerStartCommand(program: Command, deps: GpuCommandDeps = {}): Command {
  const exit = deps.exit ?? ((code: number): never => process.exit(code));
  const cmd = program
    .command("start")
    .description("The main job: benchmark the headline cases on a Hopper GPU; without one, the CPU reference and the roofline analysis")
    .addOption(new Option("--iters <n>", "timed calls per case on the GPU (at least 20)").argParser(intAtLeast(20)).default(40))
    .addOption(new Option("--json [file]", "write the JSON record to FILE (without FILE: print it instead of the tables)"))
    .addOption(new Option("--svg [file]", "on a GPU, write the roofline plot (default file under bench/results/)"))
    .addHelpText("after", EXAMPLES);
  reportCommanderErrors(cmd, exit, "start");

  cmd.action(async (opts: StartOptions) => {
    const io = cliIo(cmd);
    const json = opts.json !== undefined;
    const probe = (deps.probeGpu ?? probeGpu)();
    let code: number;
    if (probe.ok) {
      const cases = HEADLINE_CASES.map((n) => benchCaseByName(n)).filter((c): c is BenchCase => c !== undefined);
      code = guarded(io, "start", json, () =>
        runBench({ cases, iters: opts.iters, seed: 1, json: opts.json, svg: opts.svg }, probe.device, io, deps, "start"),
      );
    } else {
      code = guarded(io, "start", json, () => runWithoutGpu(probe.reason, opts, io, deps.cache ?? new CeilingsCache()));
    }
    if (code !== 0) exit(code);
  });
  return cmd;
}

/** What the CPU reference did on the small case. */
interface CpuReferenceRun {
  shape: { b: number; s_q: number; h_q: number; h_kv: number; seqlens: readonly number[]; causal: boolean; dtype: "bf16" };
  timeMs: number;
  /** FLOPs of the call by FlashMLA's formula (mean length, causal ignored). */
  flop: number;
  gflopPerS: number;
  /** Rows the second run recomputed alone, and whether they match the first run bit for bit. */
  rowsRechecked: number;
  ok: boolean;
  message: string;
}

function runWithoutGpu(reason: string, opts: StartOptions, io: CliIo, cache: Pick<CeilingsCache, "all">): number {
  const c = io.colors;
  const cpu = cpuReferenceRun();
  const names = [...HEADLINE_CASES];
  const cases = names.map((n) => benchCaseByName(n)).filter((x): x is BenchCase => x !== undefined);
  // The roofs `flashmla roofline` uses, so the two tables agree on every figure and bound.
  const { spec: gpu, measuredSource } = analysisGpu("h200", cache);
  const roofs = referenceCeiling(gpu);
  const reports = cases.map((bc) => ({ bc, report: rooflineReport(benchCaseShape(bc), gpu, bc.anchor !== undefined ? { measuredTimeUs: bc.anchor.timeUs } : {}) }));

  if (opts.json !== undefined) {
    const data = {
      gpu: null,
      noGpuReason: reason,
      cpuReference: cpu,
      roofline: {
        gpu: gpu.name,
        roofs,
        measuredSource,
        cases: reports.map(({ bc, report }) => ({
          case: bc.name,
          kernel: benchCaseKernel(bc),
          flop: report.cost.flop,
          bytes: report.cost.bytes,
          intensity: report.cost.intensity,
          bound: report.bound,
          idealUs: report.ceilings.find((x) => x.label === report.reference)?.idealUs,
          anchor: bc.anchor,
          anchorPercentOfRoofline: report.measured?.percentOfRoofline,
          firstBar: bc.firstBar,
          goal: bc.goal,
        })),
      },
    };
    const text = `${JSON.stringify(data, null, 2)}\n`;
    if (opts.json === true) io.out(text);
    else {
      io.err(`flashmla start: --json FILE is for GPU runs; printing the CPU results instead\n`);
      io.out(text);
    }
    return cpu.ok ? 0 : FAILURE_EXIT_CODE;
  }

  const lines: string[] = [];
  lines.push(`${c.bold(c.yellow("No GPU found"))}: ${reason}.`);
  lines.push(`flashmla start runs what works without one: the CPU reference and the roofline analysis. On an H100, H200 or H800 it benchmarks the headline cases instead.`);
  if (opts.svg !== undefined) lines.push(c.dim("note: --svg plots measured points, which need a GPU; no plot written."));
  lines.push("");
  const s = cpu.shape;
  lines.push(c.bold("CPU reference (float64) on a small dense case"));
  lines.push(`  b=${s.seqlens.length} s_q=${s.s_q} h_q=${s.h_q} h_kv=${s.h_kv} s_k=${s.seqlens.join("/")} ${s.causal ? "causal " : ""}${s.dtype}`);
  lines.push(`  ${fmt(cpu.timeMs, 1)} ms for ${fmt(cpu.flop / 1e6, 1)} MFLOP by FlashMLA's formula (${fmt(cpu.gflopPerS, 2)} GFLOP/s)`);
  lines.push(`  second run of ${cpu.rowsRechecked} sampled rows alone: ${cpu.ok ? c.green("identical (ok)") : c.red(`FAILED: ${cpu.message}`)}`);
  lines.push("");
  lines.push(c.bold(`Roofline of the headline cases on the ${gpu.name}`) + ` (${roofs.label} roofs ${fmt(roofs.tflops, 0)} TFLOPS, ${fmt(roofs.gbPerS, 0)} GB/s; ridge ${fmt(roofs.ridge, 1)} FLOP/B)`);
  if (measuredSource !== undefined) lines.push(c.dim(`measured roofs: ${measuredSource}`));
  const t = new Table({
    head: ["case", "kernel", "GFLOP", "MB moved", "FLOP/B", "bound", "ideal µs", "FlashMLA µs", "% of roofline", "first bar", "goal"].map((h) => c.bold(h)),
    style: { head: [], border: [], compact: true },
  });
  for (const { bc, report } of reports) {
    const ideal = report.ceilings.find((x) => x.label === report.reference)?.idealUs ?? NaN;
    t.push([
      bc.name,
      benchCaseKernel(bc),
      fmt(report.cost.flop / 1e9, 1),
      fmt(report.cost.bytes / 1e6, 1),
      fmt(report.cost.intensity, 1),
      report.bound === "compute" ? c.yellow("compute") : c.cyan("memory"),
      fmt(ideal, 1),
      bc.anchor === undefined ? "-" : fmt(bc.anchor.timeUs, bc.anchor.timeUs < 100 ? 1 : 0),
      report.measured === undefined ? "-" : fmt(report.measured.percentOfRoofline, 1),
      targetCell(bc.firstBar, c),
      targetCell(bc.goal, c),
    ]);
  }
  lines.push(t.toString());
  lines.push(c.dim("ideal µs = max(FLOP / peak, bytes / bandwidth); bound: the roof the intensity meets first; % of roofline = ideal / FlashMLA's time (H200, same harness). Any case in detail: flashmla roofline --case NAME"));
  io.out(`${lines.join("\n")}\n`);
  return cpu.ok ? 0 : FAILURE_EXIT_CODE;
}

/**
 * Times the float64 CPU reference on the small case, then recomputes a sample of rows alone (the
 * reference's row-subset path) and requires them to match the first run exactly.
 */
function cpuReferenceRun(): CpuReferenceRun {
  const { s_q, h_q, h_kv, seqlens, causal } = CPU_CASE;
  const hc = makeDenseCase(CPU_CASE);
  const args = { q: hc.q, kCache: hc.kCache, blockTable: hc.blockTable, cacheSeqlens: hc.cacheSeqlens, headDimV: D_V, causal };
  const t0 = performance.now();
  const full = mlaDecodeReference(args);
  const timeMs = performance.now() - t0;
  const rows: ReferenceRow[] = [];
  for (let i = 0; i < seqlens.length; i++) for (const head of [0, h_q - 1]) for (let token = 0; token < s_q; token++) rows.push({ batch: i, token, head });
  const part = mlaDecodeReference(args, { rows });
  const pick = (r: { outF32: Float32Array; lse: { host?: ArrayLike<number> } }) => {
    const out = new Float32Array(rows.length * (D_V + 1));
    const lse = r.lse.host as Float32Array;
    rows.forEach(({ batch, token, head }, n) => {
      out.set(r.outF32.subarray(((batch * s_q + token) * h_q + head) * D_V, ((batch * s_q + token) * h_q + head + 1) * D_V), n * (D_V + 1));
      out[n * (D_V + 1) + D_V] = lse[(batch * h_q + head) * s_q + token];
    });
    return out;
  };
  const cmp = compareTensors(pick(part), pick(full), { abs: 0, rel: 0 }, { name: "sampled rows (out and lse)" });
  const mean = seqlens.reduce((a, n) => a + n, 0) / seqlens.length;
  const flop = mlaCost({ kind: "dense", b: seqlens.length, h_q, h_kv, s_q, s_k: mean }).flop;
  return {
    shape: { b: seqlens.length, s_q, h_q, h_kv, seqlens, causal, dtype: "bf16" },
    timeMs,
    flop,
    gflopPerS: flop / (timeMs * 1e6),
    rowsRechecked: rows.length,
    ok: cmp.ok,
    message: cmp.message,
  };
}


