import { Command, InvalidArgumentError, Option } from "commander";
import Table from "cli-table3";
import pc from "picocolors";
import { BENCH_CASES, benchCaseByName, benchCaseShape, meanCacheLength, type BenchCase, type Target } from "../../bench/cases.js";
import { GPU_KEYS, GPUS, getGpuSpec, gpuSpecFromName, type GpuSpec, type MeasuredCeilings } from "../../roofline/gpus.js";
import { FP8_TOKEN_BYTES } from "../../numeric/kvCacheFp8.js";
import { expectedUniqueTokens, type MlaShape } from "../../roofline/mlaCost.js";
import { rooflineReport, type RooflineReport } from "../../roofline/rooflineReport.js";
import { fmt } from "../options.js";

/** Exit status for a command line that cannot be run as given. */
export const USAGE_EXIT_CODE = 2;

/** What the command needs from outside; tests inject both. */
export interface RooflineCommandDeps {
  /**
   * Name of the GPU in use, as the driver reports it ("NVIDIA H200"), for `--gpu detect`; may throw
   * or return undefined when there is no GPU. @default a detector that finds none
   */
  detectGpuName?: () => string | undefined | Promise<string | undefined>;
  /** Ends the process with a status. @default process.exit */
  exit?: (code: number) => never;
}

interface RooflineOptions {
  case?: string;
  b?: number;
  hq?: number;
  hkv?: number;
  sq?: number;
  sk?: number;
  fp8?: boolean;
  topk?: number;
  gpu: string;
  tflops?: number;
  gbps?: number;
  time?: number;
  json?: boolean;
}

const EXAMPLES = `
Examples:
  Dense, compute-bound (h_q·s_q = 128):
    $ flashmla roofline --b 128 --hq 128 --sq 1 --sk 8192
  A tensor-parallel shard on the seed's H800, memory-bound:
    $ flashmla roofline --b 128 --hq 16 --sk 8k --gpu h800
  Sparse FP8, with the per-token cycle budget:
    $ flashmla roofline --b 128 --hq 128 --sq 2 --sk 32k --fp8 --topk 2048
  A named case of BENCH.md, with FlashMLA's anchor and our targets:
    $ flashmla roofline --case dense-compute
  A measured time against the roofs and targets, as JSON:
    $ flashmla roofline --case sparse-v32 --time 350 --json

Formulas are FlashMLA's (BENCH.md "Formulas"); causal masking is ignored in the counts.
Exit status: 0 ok, ${USAGE_EXIT_CODE} bad command line.`;

/**
 * Adds `roofline` to `program`: FLOPs, bytes, intensity, ridge points, the binding roof and the
 * ideal time of one MLA decode call, plus the per-token cycle budget for the sparse FP8 kernel.
 */
export function registerRooflineCommand(program: Command, deps: RooflineCommandDeps = {}): Command {
  const exit = deps.exit ?? ((code: number): never => process.exit(code));
  const cmd = program
    .command("roofline")
    .description("Roofline of one MLA decode call: FLOPs, bytes, intensity, ridge point, bound and ideal time")
    .addOption(new Option("--case <name>", "take the shape from a named benchmark case (bench/cases.ts)"))
    .addOption(new Option("--b <n>", "batch size (requests)").argParser(positiveInteger))
    .addOption(new Option("--hq <n>", "query heads h_q").argParser(positiveInteger))
    .addOption(new Option("--hkv <n>", "KV heads h_kv (default 1)").argParser(positiveInteger))
    .addOption(new Option("--sq <n>", "query tokens per request s_q (default 1)").argParser(positiveInteger))
    .addOption(new Option("--sk <n>", "mean cache length s̄_k (8192 or 8k)").argParser(positiveInteger))
    .addOption(new Option("--fp8", "sparse decode over the FP8 cache (needs --topk)"))
    .addOption(new Option("--topk <n>", "indices per query token (sparse)").argParser(positiveInteger))
    .addOption(new Option("--gpu <name>", "GPU whose roofs to use").choices([...GPU_KEYS, "detect"]).default("h200"))
    .addOption(new Option("--tflops <x>", "measured tensor peak, overrides the table's").argParser(positiveNumber))
    .addOption(new Option("--gbps <x>", "measured read bandwidth in GB/s, overrides the table's").argParser(positiveNumber))
    .addOption(new Option("--time <us>", "a measured time for the call in µs: show what it achieves").argParser(positiveNumber))
    .addOption(new Option("--json", "print the report as JSON"))
    .addHelpText("after", EXAMPLES)
    // Commander ends every error with status 1; a bad command line is status 2 here.
    .exitOverride((err) => exit(err.exitCode === 0 ? 0 : USAGE_EXIT_CODE));

  cmd.action(async (opts: RooflineOptions) => {
    const usage = (message: string): never => cmd.error(`error: ${message}`, { exitCode: USAGE_EXIT_CODE, code: "flashmla.usage" });
    const out = cmd.configureOutput();
    const write = (s: string): void => (out.writeOut ?? ((t: string) => process.stdout.write(t)))(s);
    const notes: string[] = [];

    const resolved = resolveShape(opts, usage);
    const gpu = await resolveGpu(opts, deps, notes);
    if (resolved.overridden && resolved.case !== undefined) {
      notes.push(`the shape differs from case ${resolved.case.name}, so its anchor and targets are not shown`);
    }
    const benchCase = resolved.overridden ? undefined : resolved.case;
    const anchor = benchCase?.anchor;
    // The anchors were measured on an H200: under another GPU's roofs they would mislead.
    const anchorHere = gpu.key === "h200" ? anchor : undefined;
    if (anchor !== undefined && anchorHere === undefined && opts.time === undefined) {
      notes.push(`FlashMLA's anchor was measured on an H200, so it is not placed under the ${gpu.key} roofs`);
    }
    const report = rooflineReport(resolved.shape, gpu, { measuredTimeUs: opts.time ?? anchorHere?.timeUs });
    if (report.cycleBudget !== undefined && !report.cycleBudget.crossoverApplies) {
      notes.push(
        `crossover needs ${report.cycleBudget.crossoverCtas} CTAs of ${report.cycleBudget.hPerCta} heads on one token ` +
          `(h_q ≥ ${report.cycleBudget.crossoverCtas * report.cycleBudget.hPerCta}); its rows are shown for comparison only`,
      );
    }
    const timeSource = opts.time !== undefined ? "measured (--time)" : anchorHere !== undefined ? "FlashMLA on H200 (anchor)" : undefined;

    if (opts.json === true) {
      const caseJson =
        benchCase === undefined
          ? undefined
          : { name: benchCase.name, causal: benchCase.causal, seqlens: benchCase.seqlens, bound: benchCase.bound, anchor, firstBar: benchCase.firstBar, goal: benchCase.goal };
      write(`${JSON.stringify({ case: caseJson, timeSource, notes, ...report }, null, 2)}\n`);
      return;
    }
    const colors = pc.createColors(out.getOutHasColors?.() ?? false);
    write(renderText(report, { benchCase, timeSource, notes, colors, gpu, targetsMeasured: opts.time !== undefined }));
  });
  return cmd;
}

function positiveInteger(value: string): number {
  const m = /^(\d+)([kK]?)$/.exec(value.trim());
  const n = m === null ? NaN : Number(m[1]) * (m[2] === "" ? 1 : 1024);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError("expected a positive integer (8192 or 8k).");
  return n;
}

function positiveNumber(value: string): number {
  const n = value.trim() === "" ? NaN : Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a positive number.");
  return n;
}

interface ResolvedShape {
  shape: MlaShape;
  case?: BenchCase;
  /** Some shape option was given next to --case. */
  overridden: boolean;
}

function resolveShape(opts: RooflineOptions, usage: (message: string) => never): ResolvedShape {
  let c: BenchCase | undefined;
  if (opts.case !== undefined) {
    c = benchCaseByName(opts.case);
    if (c === undefined) {
      const members = BENCH_CASES.filter((x) => x.group === opts.case).map((x) => x.name);
      if (members.length > 0) usage(`case '${opts.case}' is a grid of ${members.length} cases; name one: ${members.join(", ")}`);
      const names = BENCH_CASES.filter((x) => x.group === undefined).map((x) => x.name);
      usage(`unknown case '${opts.case}'; known cases: ${names.join(", ")}, and dense-grid-*`);
    }
  }
  const overridden = [opts.b, opts.hq, opts.hkv, opts.sq, opts.sk, opts.topk, opts.fp8].some((v) => v !== undefined);
  if (c !== undefined && !overridden) return { shape: benchCaseShape(c), case: c, overridden };

  const b = opts.b ?? c?.b;
  const h_q = opts.hq ?? c?.h_q;
  const h_kv = opts.hkv ?? c?.h_kv ?? 1;
  const s_q = opts.sq ?? c?.s_q ?? 1;
  const s_k = opts.sk ?? (c === undefined ? undefined : meanCacheLength(c.seqlens));
  const topk = opts.topk ?? c?.topk;
  const fp8 = opts.fp8 === true || c?.kind === "sparse";
  for (const [flag, v] of [["--b <n>", b], ["--hq <n>", h_q], ["--sk <n>", s_k]] as const) {
    if (v === undefined) usage(`required option '${flag}' not specified (or give --case NAME)`);
  }
  // The loop above has ruled undefined out; TypeScript cannot see through it.
  const [B, HQ, SK] = [b as number, h_q as number, s_k as number];
  if (HQ % h_kv !== 0) usage(`--hkv ${h_kv} must divide --hq ${HQ}`);
  if (!fp8) {
    if (topk !== undefined) usage("--topk applies to sparse decode over the FP8 cache: add --fp8");
    return { shape: { kind: "dense", b: B, h_q: HQ, h_kv, s_q, s_k: SK }, case: c, overridden };
  }
  if (topk === undefined) usage("--fp8 needs --topk <n> (sparse decode attends topk tokens per query token)");
  const TOPK = topk as number;
  if (h_kv !== 1) usage(`sparse FP8 decode has one KV head, got --hkv ${h_kv}`);
  if (!Number.isInteger(SK)) usage(`sparse decode needs a whole cache length, got ${SK}`);
  if (TOPK > SK) usage(`--topk ${TOPK} exceeds the cache length --sk ${SK}`);
  const shape: MlaShape = { kind: "sparse", b: B, h_q: HQ, s_q, topk: TOPK, nUnique: expectedUniqueTokens(B, SK, s_q, TOPK) };
  return { shape, case: c, overridden };
}

async function resolveGpu(opts: RooflineOptions, deps: RooflineCommandDeps, notes: string[]): Promise<GpuSpec> {
  let key = opts.gpu;
  if (key === "detect") {
    let name: string | undefined;
    try {
      name = await deps.detectGpuName?.();
    } catch (e) {
      notes.push(`GPU detection failed (${e instanceof Error ? e.message : String(e)})`);
    }
    const found = name === undefined ? undefined : gpuSpecFromName(name);
    if (found === undefined) {
      notes.push(name === undefined ? "no GPU detected: using h200 figures" : `no figures for '${name}': using h200 figures`);
      key = "h200";
    } else {
      key = found.key;
    }
  }
  const measured: MeasuredCeilings = {};
  if (opts.tflops !== undefined) measured.gemmTflops = opts.tflops;
  if (opts.gbps !== undefined) measured.readGbPerS = opts.gbps;
  if (Object.keys(measured).length === 0) return GPUS[key as keyof typeof GPUS];
  measured.source = "command line";
  return getGpuSpec(key, measured);
}

interface RenderContext {
  benchCase?: BenchCase;
  timeSource?: string;
  notes: string[];
  colors: ReturnType<typeof pc.createColors>;
  gpu: GpuSpec;
  targetsMeasured: boolean;
}

function renderText(r: RooflineReport, ctx: RenderContext): string {
  const { colors: c, gpu } = ctx;
  const lines: string[] = [];
  const s = r.shape;
  const kind = s.kind === "dense" ? "dense bf16" : "sparse FP8";
  lines.push(c.bold(`MLA decode roofline: ${kind} on ${gpu.name}`) + ` (${gpu.sms} SMs, max SM clock ${gpu.maxSmClockMhz} MHz)`);
  const dims =
    s.kind === "dense"
      ? `b=${s.b} h_q=${s.h_q} h_kv=${s.h_kv ?? 1} s_q=${s.s_q} s̄_k=${fmt(s.s_k, Number.isInteger(s.s_k) ? 0 : 2)}`
      : `b=${s.b} h_q=${s.h_q} h_kv=1 s_q=${s.s_q} topk=${s.topk ?? "-"}`;
  const caseText = ctx.benchCase === undefined ? "" : `   case ${ctx.benchCase.name}${ctx.benchCase.causal ? ", causal" : ""}`;
  lines.push(`shape      ${dims}${caseText}`);
  lines.push("");
  lines.push(`FLOPs      ${fmtInt(r.cost.flop)}  (${fmt(r.cost.flop / 1e9, 2)} GFLOP)`);
  lines.push(`bytes      ${fmtInt(r.cost.bytes)}  (${fmt(r.cost.bytes / 1e9, 3)} GB)`);
  if (r.cost.nAttended !== undefined) {
    lines.push(
      `tokens     ${fmtInt(r.cost.nAttended)} attended, ${fmtInt(r.cost.nUnique ?? r.cost.nAttended)} distinct read` +
        ` (expected for random indices, ${FP8_TOKEN_BYTES} B each)`,
    );
  }
  lines.push(`intensity  ${fmt(r.cost.intensity, 2)} FLOP/byte`);
  lines.push("");

  const roofs = table(c, ["roof", "TFLOPS", "GB/s", "ridge FLOP/B", "bound", "compute µs", "memory µs", "ideal µs"]);
  for (const x of r.ceilings) {
    const bound = x.bound === "compute" ? c.yellow("compute") : c.cyan("memory");
    roofs.push([x.label, fmt(x.tflops, 0), fmt(x.gbPerS, 0), fmt(x.ridge, 1), bound, fmt(x.computeUs, 1), fmt(x.memoryUs, 1), c.bold(fmt(x.idealUs, 1))]);
  }
  lines.push(roofs.toString());

  const m = r.measured;
  if (m !== undefined) {
    const ref = r.ceilings.find((x) => x.label === r.reference);
    lines.push("");
    lines.push(
      `${ctx.timeSource ?? "measured"}: ${fmt(m.timeUs, 1)} µs = ${fmt(m.tflops, 1)} TFLOPS, ${fmt(m.gbPerS, 0)} GB/s; ` +
        `${fmt(m.percentOfPeak, 1)} % of the ${r.reference} ${fmt(ref?.tflops ?? 0, 0)} TFLOPS, ` +
        `${fmt(m.percentOfBandwidth, 1)} % of ${fmt(ref?.gbPerS ?? 0, 0)} GB/s, ${fmt(m.percentOfRoofline, 1)} % of the roofline`,
    );
  }
  const bc = ctx.benchCase;
  if (bc !== undefined) {
    const a = bc.anchor;
    if (a !== undefined) {
      const extra = [...(a.extra ?? [])].map((f) => `${fmt(f.value, 0)} ${f.unit}`);
      if (a.mainKernel !== undefined) extra.push(`main kernel ${a.mainKernel.value} ${a.mainKernel.unit}`);
      const elsewhere = a.elsewhere === undefined ? "" : `; ${a.elsewhere.source}: ${a.elsewhere.figure.value} ${a.elsewhere.figure.unit}`;
      lines.push(`BENCH.md anchor: FlashMLA ${a.timeUs} µs, ${a.figure.value} ${a.figure.unit}${extra.length > 0 ? ` (${extra.join(", ")})` : ""}${elsewhere}`);
    }
    if (bc.firstBar !== undefined || bc.goal !== undefined) {
      const verdict = (t: Target | undefined): string => {
        if (t === undefined) return "-";
        if (!ctx.targetsMeasured || m === undefined) return t.text;
        return `${t.text} ${targetMet(t, m, r) ? c.green("[met]") : c.red("[not met]")}`;
      };
      lines.push(`targets: first bar ${verdict(bc.firstBar)}; goal ${verdict(bc.goal)}`);
    }
    if (bc.note !== undefined) lines.push(`note: ${bc.note}`);
  }

  const budget = r.cycleBudget;
  if (budget !== undefined) {
    const ref = r.ceilings.find((x) => x.label === r.reference);
    lines.push("");
    lines.push(
      c.bold("FP8 sparse cycle budget per K/V token per CTA") +
        `: ${budget.hPerCta} heads per CTA (${budget.usefulHeadsPerCta} useful), ${fmt(budget.mmaFlopPerClock, 0)} MMA FLOP/clk/SM` +
        ` → ${fmt(budget.mmaCycles, 1)} MMA clk`,
    );
    const t = table(c, ["dequant figure", "crossover", "MMA clk", "dequant clk", "bound", `ceiling TFLOPS (${r.reference} ${fmt(ref?.tflops ?? 0, 0)})`, "ideal µs"]);
    budget.rows.forEach((row, i) => {
      const bound = row.bound === "dequant" ? c.red("dequant") : c.green("MMA");
      const xo = row.crossover ? `yes (÷${budget.crossoverCtas})` : "no";
      t.push([row.label, xo, fmt(row.mmaCycles, 1), fmt(row.dequantCycles, 1), bound, fmt(row.ceilingTflops ?? 0, 0), fmt(budget.idealUs[i], 1)]);
    });
    lines.push(t.toString());
  }
  for (const n of ctx.notes) lines.push(c.dim(`note: ${n}`));
  return `${lines.join("\n")}\n`;
}

function targetMet(t: Target, m: NonNullable<RooflineReport["measured"]>, r: RooflineReport): boolean {
  const value =
    t.metric === "tflops"
      ? m.tflops
      : t.metric === "gbPerS"
        ? m.gbPerS
        : t.metric === "timeUs"
          ? m.timeUs
          : ((r.cost.nUnique ?? 0) * FP8_TOKEN_BYTES) / (m.timeUs * 1e3);
  return t.op === ">=" ? value >= t.value : value <= t.value;
}

function table(c: ReturnType<typeof pc.createColors>, head: string[]): Table.Table {
  // cli-table3 colours headers red by default; colour comes from picocolors only, on a TTY.
  return new Table({ head: head.map((h) => c.bold(h)), style: { head: [], border: [], compact: true } });
}


function fmtInt(x: number): string {
  return Math.round(x).toLocaleString("en-US");
}
