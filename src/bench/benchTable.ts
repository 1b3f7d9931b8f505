import Table from "cli-table3";
import pc from "picocolors";
import type { Target } from "./cases.js";
import type { TargetVerdict } from "./benchFigures.js";
import { cycleBudgetText } from "./benchCycleBudget.js";
import type { BenchCaseResult } from "./runBenchCase.js";

type Colors = ReturnType<typeof pc.createColors>;

/** Options of {@link benchTable}. */
export interface BenchTableOptions {
  /** @default no colour */
  colors?: Colors;
  /** Label of the roof "% ceil" refers to, for the header note. @default "measured" */
  ceilingLabel?: string;
}

const HEAD = ["case", "kernel", "µs median", "µs p90", "TFLOPS", "GB/s", "% ceil", "bound", "FlashMLA (H200)", "first bar", "goal", "check"];

/**
 * The end-of-run table of `flashmla bench`: one row per case with the kernel that served it, the
 * median and p90 time, TFLOPS, GB/s (for sparse cases the FP8 cache read, N_unique · 656 B, or 584 B
 * for MODEL1, over the time), % of the binding measured roof, the bound, FlashMLA's anchor, the first bar and goal with a met/miss verdict, and
 * the correctness check; then the SM clock, power and clock-event reasons NVML sampled during each
 * case's timed calls, the seed's cycle budget of each V3.2 sparse case and a note for each case that is
 * not plainly ok (one note for the cases that share a reason).
 */
export function benchTable(results: readonly BenchCaseResult[], opts: BenchTableOptions = {}): string {
  const c = opts.colors ?? pc.createColors(false);
  // cli-table3 colours headers red by default; colour comes from picocolors only, on a TTY.
  const t = new Table({ head: HEAD.map((h) => c.bold(h)), style: { head: [], border: [], compact: true } });
  // Reason → the cases it applies to, in the order they first appear.
  const notes = new Map<string, string[]>();
  const budgets: string[] = [];
  for (const r of results) {
    const fig = r.figures;
    const time = r.timeUs;
    const bound = r.bound;
    const check =
      r.check === undefined ? c.dim(statusText(r)) : r.check.ok ? c.green("ok") : c.red("FAILED");
    t.push([
      r.case,
      r.kernel,
      time === undefined ? c.dim("n/a") : num(time.median, 1),
      time === undefined ? "" : num(time.p90, 1),
      fig === undefined ? "" : num(fig.tflops, 1),
      fig === undefined ? "" : num(fig.cacheReadGbPerS ?? fig.gbPerS, 0),
      fig === undefined ? "" : num(fig.percentOfCeiling, 1),
      bound === "compute" ? c.yellow("compute") : c.cyan("memory"),
      anchorText(r),
      targetCell(fig?.firstBar ?? r.firstBar, c),
      targetCell(fig?.goal ?? r.goal, c),
      check,
    ]);
    if (r.cycleBudget !== undefined) budgets.push(`${r.case} (${r.kernel}): ${cycleBudgetText(r.cycleBudget)}`);
    if (r.reason !== undefined) notes.set(r.reason, [...(notes.get(r.reason) ?? []), r.case]);
  }
  const lines = [t.toString()];
  lines.push(c.dim(`% ceil: achieved TFLOPS (compute-bound) or GB/s (memory-bound) over the ${opts.ceilingLabel ?? "measured"} roof; times are the whole call (main kernel + combine).`));
  if (results.some((r) => r.kind === "sparse" && r.figures !== undefined)) {
    lines.push(c.dim("sparse rows: GB/s is the FP8 cache read (N_unique · 656 B, 584 B for MODEL1, over the time); TFLOPS count N = Σ valid indices (FlashMLA's formulas)."));
  }
  const clocks = results.filter((r) => r.smClockMhz !== undefined).map(clockText);
  if (clocks.length > 0) {
    lines.push(c.dim(`NVML during each case's timed calls (median SM clock as NVML reports it, which can be above the clock the SMs run at; power is NVML's 1 s average; clock-event reasons seen): ${clocks.join("; ")}.`));
  }
  for (const b of budgets) lines.push(b);
  for (const [reason, cases] of notes) lines.push(c.dim(`note: ${cases.join(", ")}: ${reason}`));
  return `${lines.join("\n")}\n`;
}

/** "dense-compute 1729 MHz 698 W sw-power-cap"; "none" when NVML reported no reason. */
function clockText(r: BenchCaseResult): string {
  const parts = [r.case, `${r.smClockMhz} MHz`];
  if (r.powerW !== undefined) parts.push(`${r.powerW} W`);
  if (r.clockReasons !== undefined) parts.push(r.clockReasons.length > 0 ? r.clockReasons.join("+") : "none");
  return parts.join(" ");
}

function statusText(r: BenchCaseResult): string {
  switch (r.status) {
    case "not-available":
      return "not available";
    case "error":
      return "error";
    default:
      return r.status;
  }
}

function anchorText(r: BenchCaseResult): string {
  const a = r.anchor;
  if (a === undefined) return "-";
  return `${num(a.timeUs, a.timeUs < 100 ? 1 : 0)} µs, ${num(a.figure.value, 0)} ${a.figure.unit}`;
}

/** "≥ 646 TFLOPS met" / "≤ 43.5 µs miss"; the bare target when nothing was measured. */
export function targetCell(t: Target | TargetVerdict | undefined, c: Colors): string {
  if (t === undefined) return "-";
  const unit = t.metric === "tflops" ? "TFLOPS" : t.metric === "gbPerS" ? "GB/s" : t.metric === "timeUs" ? "µs" : "GB/s cache";
  const text = `${t.op === ">=" ? "≥" : "≤"} ${num(t.value, Number.isInteger(t.value) ? 0 : 1)} ${unit}`;
  if (!("met" in t)) return text;
  return `${text} ${t.met ? c.green("met") : c.red("miss")}`;
}

function num(x: number, digits: number): string {
  return x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits, useGrouping: false });
}
