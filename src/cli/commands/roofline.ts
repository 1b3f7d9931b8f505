import { Command, InvalidArgumentError, Option } from "commander";
import Table from "cli-table3";
import pc from "picocolors";
import { analysisGpu } from "../../bench/analysisGpu.js";
import { CeilingsCache } from "../../bench/CeilingsCache.js";
import { cliIo } from "../../bench/cliIo.js";
import { BENCH_CASES, benchCaseByName, benchCaseShape, meanCacheLength, type BenchCase, type Target } from "../../bench/cases.js";
import { GPU_KEYS, getGpuSpec, gpuSpecFromName, type GpuKey, type GpuSpec, type MeasuredCeilings } from "../../roofline/gpus.js";
import { expectedUniqueTokens, mlaCost, sparseFormatDims, type ExtraCacheShape, type MlaShape, type SparseFormat } from "../../roofline/mlaCost.js";
import { rooflineReport, type RooflineReport } from "../../roofline/rooflineReport.js";
import { CASE_LIST_HINT, unknownCaseFailure } from "../caseNames.js";
import { reportCommanderErrors, reportFailure, USAGE_EXIT_CODE, type CliFailure } from "../cliErrors.js";
import { fmt } from "../options.js";

export { USAGE_EXIT_CODE };

/** What the command needs from outside; tests inject both. */
export interface RooflineCommandDeps {
  /**
   * Name of the GPU in use, as the driver reports it ("NVIDIA H200"), for `--gpu detect`; may throw
   * or return undefined when there is no GPU. @default a detector that finds none
   */
  detectGpuName?: () => string | undefined | Promise<string | undefined>;
  /** Ends the process with a status. @default process.exit */
  exit?: (code: number) => never;
  /**
   * Where `flashmla ceilings` and `flashmla bench` keep this machine's measured ceilings; when it
   * holds the chosen GPU model, its figures are the measured roofs. @default new CeilingsCache()
   */
  cache?: Pick<CeilingsCache, "all">;
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
  format?: SparseFormat;
  extraTopk?: number;
  extraSk?: number;
  extraTopkLength?: number;
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
  DeepSeek-V4 (MODEL1 cache) with a second cache in the same softmax (v4-cfg1's shape):
    $ flashmla roofline --b 128 --hq 64 --sq 2 --sk 16k --format model1 --topk 128 --extra-topk 512
  A named benchmark case (flashmla bench --list names them), with FlashMLA's time and our targets:
    $ flashmla roofline --case dense-compute
  A measured time against the roofs and targets, as JSON:
    $ flashmla roofline --case sparse-v32 --time 350 --json

FLOPs and bytes follow FlashMLA's benchmark formulas, with s̄ the mean cache length:
  dense   FLOP = 2·b·h_q·s_q·s̄·(576 + 512); bytes = 2·b·(s_q·h_q·576 + s̄·h_kv·576 + s_q·h_q·512)
  sparse  FLOP = 2·h_q·N·(576 + 512) with N = b·s_q·topk; bytes = 2·b·s_q·h_q·(576 + 512) + N_unique·656,
          N_unique the distinct tokens random indices read
  MODEL1  FLOP = 2·h_q·N·(512 + 512) with N = b·s_q·(topk + extra_topk, or its mean valid length);
          bytes = 2·b·s_q·h_q·(512 + 512) + N_unique·584, N_unique summed over both caches
Causal masking is ignored in the counts. The bound is the roof the intensity meets first (below the
ridge: memory); the measured roofs are this machine's (flashmla ceilings) when it has measured them,
else an H200's. FlashMLA's times are on an H200 with our harness. More: docs/dense-decode.md and
docs/sparse-decode.md and docs/deepseek-v4.md in the repository.
With --json, stdout is one JSON document: the report, or { "error": … } on a failure.
Exit status: 0 ok, 1 an error, ${USAGE_EXIT_CODE} bad command line.`;

/**
 * Adds `roofline` to `program`: FLOPs, bytes, intensity, ridge points, the binding roof and the
 * ideal time of one MLA decode call, plus the per-token cycle budget for the sparse FP8 kernel.
 */
export function registerRooflineCommand(program: Command, deps: RooflineCommandDeps = {}): Command {
  const exit = deps.exit ?? ((code: number): never => process.exit(code));
  const cmd = program
    .command("roofline")
    .description("Roofline of one MLA decode call: FLOPs, bytes, intensity, ridge point, bound and ideal time")
    .addOption(new Option("--case <name>", "take the shape from a named benchmark case (flashmla bench --list)"))
    .addOption(new Option("--b <n>", "batch size (requests)").argParser(positiveInteger))
    .addOption(new Option("--hq <n>", "query heads h_q").argParser(positiveInteger))
    .addOption(new Option("--hkv <n>", "KV heads h_kv (default 1)").argParser(positiveInteger))
    .addOption(new Option("--sq <n>", "query tokens per request s_q (default 1)").argParser(positiveInteger))
    .addOption(new Option("--sk <n>", "mean cache length s̄_k (8192 or 8k)").argParser(positiveInteger))
    .addOption(new Option("--fp8", "sparse decode over the FP8 cache (needs --topk)"))
    .addOption(new Option("--topk <n>", "indices per query token (sparse)").argParser(positiveInteger))
    .addOption(new Option("--format <name>", "sparse token format: v32 (DeepSeek-V3.2, 656 B, d_qk 576) or model1 (DeepSeek-V4, 584 B, d_qk = d_v = 512); implies --fp8").choices(["v32", "model1"]))
    .addOption(new Option("--extra-topk <n>", "sparse: indices per query token into a second cache in the same softmax (extra_k_cache)").argParser(positiveInteger))
    .addOption(new Option("--extra-sk <n>", "sparse: the second cache's length (default --sk)").argParser(positiveInteger))
    .addOption(new Option("--extra-topk-length <x>", "sparse: mean valid indices per query token into the second cache (extra_topk_length; default --extra-topk)").argParser(nonNegativeNumber))
    .addOption(new Option("--gpu <name>", "GPU whose roofs to use").choices([...GPU_KEYS, "detect"]).default("h200"))
    .addOption(new Option("--tflops <x>", "measured tensor peak, overrides the measured roof's").argParser(positiveNumber))
    .addOption(new Option("--gbps <x>", "measured read bandwidth in GB/s, overrides the measured roof's").argParser(positiveNumber))
    .addOption(new Option("--time <us>", "a measured time for the call in µs: show what it achieves").argParser(positiveNumber))
    .addOption(new Option("--json", "print the report as JSON"))
    .addHelpText("after", EXAMPLES);
  reportCommanderErrors(cmd, exit, "roofline");

  cmd.action(async (opts: RooflineOptions) => {
    const io = cliIo(cmd);
    const json = opts.json === true;
    const fail = (f: CliFailure): never => exit(reportFailure(io, "roofline", f, json));
    const usage = (message: string, hint?: string): never => fail({ kind: "usage", message, ...(hint !== undefined ? { hint } : {}) });
    // A bad command line ends here (exit 2), before anything is computed.
    const resolved = resolveShape(opts, usage);
    let text: string;
    try {
      text = await rooflineOutput(resolved, opts, deps, io.colors);
    } catch (e) {
      return fail({ kind: "error", message: e instanceof Error ? e.message : String(e) });
    }
    io.out(text);
  });
  return cmd;
}

/** The report for a resolved shape: text, or JSON with --json. */
async function rooflineOutput(resolved: ResolvedShape, opts: RooflineOptions, deps: RooflineCommandDeps, colors: ReturnType<typeof pc.createColors>): Promise<string> {
  const notes: string[] = [];
  const { gpu, measuredSource } = await resolveGpu(opts, deps, notes);
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
        : { name: benchCase.name, causal: benchCase.causal, seqlens: benchCase.seqlens, model1: benchCase.model1, note: benchCase.note, anchor, firstBar: benchCase.firstBar, goal: benchCase.goal };
    return `${JSON.stringify({ case: caseJson, timeSource, measuredSource, notes, ...report }, null, 2)}\n`;
  }
  return renderText(report, { benchCase, timeSource, measuredSource, notes, colors, gpu, targetsMeasured: opts.time !== undefined });
}

function positiveInteger(value: string): number {
  const m = /^(\d+)([kK]?)$/.exec(value.trim());
  const n = m === null ? NaN : Number(m[1]) * (m[2] === "" ? 1 : 1024);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError("expected a positive integer (8192 or 8k).");
  return n;
}

function nonNegativeNumber(value: string): number {
  const n = value.trim() === "" ? NaN : Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError("expected a number >= 0.");
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
  /** Options next to --case made a shape other than the case's. */
  overridden: boolean;
}

function resolveShape(opts: RooflineOptions, usage: (message: string, hint?: string) => never): ResolvedShape {
  let c: BenchCase | undefined;
  if (opts.case !== undefined) {
    c = benchCaseByName(opts.case);
    if (c === undefined) {
      const members = BENCH_CASES.filter((x) => x.group === opts.case).map((x) => x.name);
      if (members.length > 0) usage(`case '${opts.case}' is a grid of ${members.length} cases; name one, e.g. ${members[0]}`, CASE_LIST_HINT);
      const f = unknownCaseFailure(opts.case);
      usage(f.message, f.hint);
    }
  }
  const extraGiven = [opts.extraTopk, opts.extraSk, opts.extraTopkLength].some((v) => v !== undefined);
  const given = extraGiven || [opts.b, opts.hq, opts.hkv, opts.sq, opts.sk, opts.topk, opts.fp8, opts.format].some((v) => v !== undefined);
  if (c !== undefined && !given) return { shape: benchCaseShape(c), case: c, overridden: false };

  const b = opts.b ?? c?.b;
  const h_q = opts.hq ?? c?.h_q;
  const h_kv = opts.hkv ?? c?.h_kv ?? 1;
  const s_q = opts.sq ?? c?.s_q ?? 1;
  const s_k = opts.sk ?? (c === undefined ? undefined : meanCacheLength(c.seqlens));
  const topk = opts.topk ?? c?.topk;
  const fp8 = opts.fp8 === true || opts.format !== undefined || c?.kind === "sparse";
  for (const [flag, v] of [["--b <n>", b], ["--hq <n>", h_q], ["--sk <n>", s_k]] as const) {
    if (v === undefined) usage(`required option '${flag}' not specified (or give --case NAME)`);
  }
  // The loop above has ruled undefined out; TypeScript cannot see through it.
  const [B, HQ, SK] = [b as number, h_q as number, s_k as number];
  if (HQ % h_kv !== 0) usage(`--hkv ${h_kv} must divide --hq ${HQ}`);
  let shape: MlaShape;
  if (!fp8) {
    if (topk !== undefined) usage("--topk applies to sparse decode over the FP8 cache: add --fp8");
    if (extraGiven) usage("--extra-topk, --extra-sk and --extra-topk-length apply to sparse decode over the FP8 cache: add --fp8");
    // A dense case's head (dense-compute-d512's d_qk 512) carries over.
    const d_qk = c?.kind === "dense" ? c.d_qk : undefined;
    shape = { kind: "dense", b: B, h_q: HQ, h_kv, s_q, s_k: SK, ...(d_qk !== undefined ? { d_qk } : {}) };
  } else {
    if (topk === undefined) usage("--fp8 needs --topk <n> (sparse decode attends topk tokens per query token)");
    const TOPK = topk as number;
    if (h_kv !== 1) usage(`sparse FP8 decode has one KV head, got --hkv ${h_kv}`);
    if (!Number.isInteger(SK)) usage(`sparse decode needs a whole cache length, got ${SK}`);
    if (TOPK > SK) usage(`--topk ${TOPK} exceeds the cache length --sk ${SK}`);
    // The case's format and second cache carry over unless the command line replaces them.
    const caseShape = c === undefined ? undefined : benchCaseShape(c);
    const caseSparse = caseShape?.kind === "sparse" ? caseShape : undefined;
    const format = opts.format ?? caseSparse?.format ?? "v32";
    const extra = resolveExtra(opts, caseSparse?.extra, SK, usage);
    // V3.2 over one cache keeps its precomputed count; otherwise the cost model sums it over the caches.
    shape =
      format === "v32" && extra === undefined
        ? { kind: "sparse", b: B, h_q: HQ, s_q, topk: TOPK, nUnique: expectedUniqueTokens(B, SK, s_q, TOPK) }
        : { kind: "sparse", ...(format !== "v32" ? { format } : {}), b: B, h_q: HQ, s_q, topk: TOPK, s_k: SK, ...(extra !== undefined ? { extra } : {}) };
  }
  // Options that restate the case (--case sparse-v32 --fp8 --topk 2048) keep its figures; only a
  // different shape drops them.
  return { shape, case: c, overridden: c !== undefined && !sameShape(shape, benchCaseShape(c)) };
}

/**
 * The second cache from --extra-topk, --extra-sk and --extra-topk-length over the case's (`base`): a new
 * --extra-topk drops the case's mean valid length; the length defaults to the main cache's, `s_k`.
 */
function resolveExtra(opts: RooflineOptions, base: ExtraCacheShape | undefined, s_k: number, usage: (message: string) => never): ExtraCacheShape | undefined {
  const topk = opts.extraTopk ?? base?.topk;
  if (topk === undefined) {
    if (opts.extraSk !== undefined || opts.extraTopkLength !== undefined) usage("--extra-sk and --extra-topk-length describe a second cache: add --extra-topk <n>");
    return undefined;
  }
  const extraSk = opts.extraSk ?? base?.s_k ?? s_k;
  const mean = opts.extraTopkLength ?? (opts.extraTopk === undefined ? base?.meanTopkLength : undefined);
  if (topk > extraSk) usage(`--extra-topk ${topk} exceeds the second cache's length ${extraSk} (--extra-sk)`);
  if (mean !== undefined && mean > topk) usage(`--extra-topk-length ${mean} exceeds --extra-topk ${topk}`);
  return { s_k: extraSk, topk, ...(mean !== undefined ? { meanTopkLength: mean } : {}) };
}

/** Whether two cost-model shapes describe the same call (same counts, so the same FLOPs and bytes). */
export function sameShape(x: MlaShape, y: MlaShape): boolean {
  const close = (a: number | undefined, b: number | undefined) => a === b || (a !== undefined && b !== undefined && Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b)));
  if (x.kind !== y.kind || x.b !== y.b || x.h_q !== y.h_q || x.s_q !== y.s_q) return false;
  if (x.kind === "dense" && y.kind === "dense") return (x.h_kv ?? 1) === (y.h_kv ?? 1) && x.d_qk === y.d_qk && close(x.s_k, y.s_k);
  if (x.kind === "sparse" && y.kind === "sparse") {
    // The counts come from the cost model: a MODEL1 shape gives its caches' lengths, not N_unique.
    const [cx, cy] = [mlaCost(x), mlaCost(y)];
    return (x.format ?? "v32") === (y.format ?? "v32") && x.topk === y.topk && close(cx.nAttended, cy.nAttended) && close(cx.nUnique, cy.nUnique) && close(cx.bytes, cy.bytes);
  }
  return false;
}

async function resolveGpu(opts: RooflineOptions, deps: RooflineCommandDeps, notes: string[]): Promise<{ gpu: GpuSpec; measuredSource?: string }> {
  let key = opts.gpu as GpuKey | "detect";
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
  const base = analysisGpu(key, deps.cache ?? new CeilingsCache());
  const measured: MeasuredCeilings = {};
  if (opts.tflops !== undefined) measured.gemmTflops = opts.tflops;
  if (opts.gbps !== undefined) measured.readGbPerS = opts.gbps;
  if (Object.keys(measured).length === 0) return { gpu: base.spec, ...(base.measuredSource !== undefined ? { measuredSource: base.measuredSource } : {}) };
  measured.source = "command line";
  // The command line replaces the figure it names; the other half of the roof stays as measured.
  return { gpu: getGpuSpec(key, { ...base.spec.measured, ...measured }), measuredSource: "command line (--tflops/--gbps)" };
}

interface RenderContext {
  benchCase?: BenchCase;
  timeSource?: string;
  measuredSource?: string;
  notes: string[];
  colors: ReturnType<typeof pc.createColors>;
  gpu: GpuSpec;
  targetsMeasured: boolean;
}

function renderText(r: RooflineReport, ctx: RenderContext): string {
  const { colors: c, gpu } = ctx;
  const lines: string[] = [];
  const s = r.shape;
  const kind = s.kind === "dense" ? "dense bf16" : s.format === "model1" ? "sparse FP8, DeepSeek-V4 MODEL1 cache (d_qk = d_v = 512)" : "sparse FP8";
  lines.push(c.bold(`MLA decode roofline: ${kind} on ${gpu.name}`) + ` (${gpu.sms} SMs, max SM clock ${gpu.maxSmClockMhz} MHz)`);
  const dims =
    s.kind === "dense"
      ? `b=${s.b} h_q=${s.h_q} h_kv=${s.h_kv ?? 1} s_q=${s.s_q} s̄_k=${fmt(s.s_k, Number.isInteger(s.s_k) ? 0 : 2)}${s.d_qk !== undefined ? ` d_qk=${s.d_qk}` : ""}`
      : `b=${s.b} h_q=${s.h_q} h_kv=1 s_q=${s.s_q} topk=${s.topk ?? "-"}${s.s_k !== undefined ? ` s_k=${fmt(s.s_k, 0)}` : ""}${extraText(s.extra)}`;
  const caseText = ctx.benchCase === undefined ? "" : `   case ${ctx.benchCase.name}${ctx.benchCase.causal ? ", causal" : ""}`;
  lines.push(`shape      ${dims}${caseText}`);
  lines.push("");
  lines.push(`FLOPs      ${fmtInt(r.cost.flop)}  (${fmt(r.cost.flop / 1e9, 2)} GFLOP)`);
  lines.push(`bytes      ${fmtInt(r.cost.bytes)}  (${fmt(r.cost.bytes / 1e9, 3)} GB)`);
  if (r.cost.nAttended !== undefined && s.kind === "sparse") {
    lines.push(
      `tokens     ${fmtInt(r.cost.nAttended)} attended, ${fmtInt(r.cost.nUnique ?? r.cost.nAttended)} distinct read` +
        ` (expected for random indices${s.extra !== undefined ? " over both caches" : ""}, ${sparseFormatDims(s).tokenBytes} B each)`,
    );
  }
  lines.push(`intensity  ${fmt(r.cost.intensity, 2)} FLOP/byte`);
  const ref0 = r.ceilings.find((x) => x.label === r.reference);
  lines.push(`bound      ${r.bound === "compute" ? c.yellow("compute") : c.cyan("memory")} (intensity ${r.bound === "compute" ? "at or past" : "below"} the ${r.reference} ridge, ${fmt(ref0?.ridge ?? 0, 1)} FLOP/byte)`);
  lines.push("");

  const roofs = table(c, ["roof", "TFLOPS", "GB/s", "ridge FLOP/B", "bound", "compute µs", "memory µs", "ideal µs"]);
  for (const x of r.ceilings) {
    const bound = x.bound === "compute" ? c.yellow("compute") : c.cyan("memory");
    roofs.push([x.label, fmt(x.tflops, 0), fmt(x.gbPerS, 0), fmt(x.ridge, 1), bound, fmt(x.computeUs, 1), fmt(x.memoryUs, 1), c.bold(fmt(x.idealUs, 1))]);
  }
  lines.push(roofs.toString());
  if (ctx.measuredSource !== undefined && r.ceilings.some((x) => x.label === "measured")) lines.push(c.dim(`measured roofs: ${ctx.measuredSource}`));

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
      lines.push(`anchor: FlashMLA ${a.timeUs} µs, ${a.figure.value} ${a.figure.unit}${extra.length > 0 ? ` (${extra.join(", ")})` : ""} on an H200 with our harness${elsewhere}`);
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
          : (r.cost.cacheBytes ?? 0) / (m.timeUs * 1e3);
  return t.op === ">=" ? value >= t.value : value <= t.value;
}

function table(c: ReturnType<typeof pc.createColors>, head: string[]): Table.Table {
  // cli-table3 colours headers red by default; colour comes from picocolors only, on a TTY.
  return new Table({ head: head.map((h) => c.bold(h)), style: { head: [], border: [], compact: true } });
}


/** " + extra topk=512 s_k=16384" (with "(mean valid 512)" for a valid length), or "" without a second cache. */
function extraText(e: ExtraCacheShape | undefined): string {
  if (e === undefined) return "";
  const mean = e.meanTopkLength === undefined ? "" : ` (mean valid ${fmt(e.meanTopkLength, Number.isInteger(e.meanTopkLength) ? 0 : 1)})`;
  return ` + extra topk=${e.topk}${mean}${e.s_k !== undefined ? ` s_k=${fmt(e.s_k, 0)}` : ""}`;
}

function fmtInt(x: number): string {
  return Math.round(x).toLocaleString("en-US");
}
