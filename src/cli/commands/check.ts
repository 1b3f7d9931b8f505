import { Command, Option } from "commander";
import Table from "cli-table3";
import { BenchProgress, progressMode } from "../../bench/BenchProgress.js";
import { cliIo, type CliIo } from "../../bench/cliIo.js";
import { probeGpu } from "../../bench/probeGpu.js";
import { CHECK_GRID_KINDS, CHECK_GRIDS, checkGrid, type CheckGridName } from "../../testing/checkGrid.js";
import { runCheckCase, type CheckCaseResult } from "../../testing/runCheckCase.js";
import { Stream } from "../../runtime/Stream.js";
import { guarded, noGpuFailure, type GpuCommandDeps } from "./bench.js";
import { FAILURE_EXIT_CODE, USAGE_EXIT_CODE, reportCommanderErrors, reportFailure } from "../cliErrors.js";
import { nonNegativeInteger } from "../options.js";

interface CheckOptions {
  grid: CheckGridName;
  seed: number;
  dtype?: "bf16" | "fp16";
  json?: boolean;
  verbose?: boolean;
}

const EXAMPLES = `
Examples:
  A quick check (11 cases, seconds):
    $ flashmla check
  FlashMLA's whole dense grid (2336 cases), fp16:
    $ flashmla check --grid flashmla --dtype fp16
  FlashMLA's sparse FP8 grid (368 cases):
    $ flashmla check --grid sparse
  Another draw of the data, results as JSON:
    $ flashmla check --seed 7 --json

Every case runs flashMlaWithKvcache, which picks the kernel for its shape (the table names it).
Data follow FlashMLA's tests: q and K ~ N(0,1)/10, varlen lengths max(N(s_k, s_k/2), s_q), a random
block table, NaN in every cache slot no request owns. out and lse are compared with the float64 CPU
reference (FlashMLA's tolerances: out abs 8e-4 or rel 2.01/128 and cosine ≤ 5e-6; lse rel 8.01/65536);
large shapes on sampled rows, and every element against the fp32 GPU reference.
Sparse: q ~ N(0,1), KV ~ N(0,1)/10 quantized to the V32 FP8 cache, distinct random indices below each
length, sinks about 31% +inf and 31% -inf, topkLength on some cases, 0xff poison in every token no index
points at; every row or (large shapes) sampled rows against the CPU reference (out abs 1e-3 or rel
2.01/128, cosine ≤ 5e-6) and every element against the fp32 GPU reference, and the whole output
scanned for NaN and for empty rows that are not out 0, lse +inf.
With --json, stdout is one JSON document: the results, or { "error": … } on a failure.
Exit status: 0 all passed, 1 a case failed or no GPU, ${USAGE_EXIT_CODE} bad command line.`;

/** Grids with more cases than this print only their failures and worst passes (unless --verbose). */
const FULL_TABLE_MAX = 40;

/**
 * Adds `check` to `program`: runs flashMlaWithKvcache against the CPU reference over a grid of cases and
 * prints a pass/fail table with the worst errors; exits 1 if any case fails.
 */
export function registerCheckCommand(program: Command, deps: GpuCommandDeps = {}): Command {
  const exit = deps.exit ?? ((code: number): never => process.exit(code));
  const cmd = program
    .command("check")
    .description("Check flashMlaWithKvcache against the CPU reference over a grid of cases (pass/fail table, worst errors)")
    .addOption(new Option("--grid <name>", "which grid of cases").choices([...CHECK_GRIDS]).default("small"))
    .addOption(new Option("--seed <n>", "seed of the lengths, block tables and data").argParser(nonNegativeInteger).default(1))
    .addOption(new Option("--dtype <dtype>", "run every dense case in this dtype (default: bf16, one fp16 case in the small grid)").choices(["bf16", "fp16"]))
    .addOption(new Option("--json", "print the results as JSON"))
    .addOption(new Option("--verbose", "list every case, also in large grids"))
    .addHelpText("after", EXAMPLES);
  reportCommanderErrors(cmd, exit, "check");

  cmd.action(async (opts: CheckOptions) => {
    const io = cliIo(cmd);
    const json = opts.json === true;
    const usage = (message: string): never => exit(reportFailure(io, "check", { kind: "usage", message }, json));
    const kind = CHECK_GRID_KINDS[opts.grid];
    if (kind === "sparse" && opts.dtype === "fp16") usage("the sparse grid is bf16 only: FlashMLA's sparse decode takes bf16 q");
    const cases = checkGrid(opts.grid, opts.dtype);
    const probe = (deps.probeGpu ?? probeGpu)();
    if (!probe.ok) return exit(reportFailure(io, "check", noGpuFailure("check", probe.reason), json));
    const device = probe.device;
    const code = guarded(io, "check", json, () => {
      const stream = Stream.create(device.ordinal);
      const progress = new BenchProgress(progressMode(deps.progress !== false), io.err);
      const results: CheckCaseResult[] = [];
      try {
        progress.start(cases.length, cases[0].name);
        let brokenInARow = 0;
        for (const spec of cases) {
          // Seeded by the place in the grid, so a case sees the same data from run to run.
          const r = runCheckCase(spec, { stream, seed: opts.seed * 100_000 + cases.indexOf(spec) });
          results.push(r);
          progress.tick(1, spec.name);
          // A kernel fault poisons the CUDA context: every later case would fail the same way.
          brokenInARow = r.error !== undefined ? brokenInARow + 1 : 0;
          if (brokenInARow >= 3) {
            io.err(`flashmla check: stopping after 3 cases in a row failed with errors (the CUDA context is probably broken)\n`);
            break;
          }
        }
      } finally {
        progress.stop();
        stream.dispose();
      }
      if (opts.json === true) {
        io.out(`${JSON.stringify({ grid: opts.grid, seed: opts.seed, gpu: device.name, cases: cases.length, results }, null, 2)}\n`);
      } else {
        io.out(checkText(results, { grid: opts.grid, gpu: device.name, total: cases.length, verbose: opts.verbose === true, colors: io.colors }));
      }
      return results.length === cases.length && results.every((r) => r.ok) ? 0 : FAILURE_EXIT_CODE;
    });
    if (code !== 0) exit(code);
  });
  return cmd;
}

/**
 * The pass/fail table of `flashmla check`: every case of a small grid, or the failures and the five
 * worst passing cases of a large one, then a summary with the worst errors over all cases.
 */
export function checkText(
  results: readonly CheckCaseResult[],
  opts: { grid: string; gpu: string; total: number; verbose: boolean; colors: CliIo["colors"] },
): string {
  const c = opts.colors;
  const t = new Table({
    head: ["case", "kernel", "lengths", "rows", "out max abs", "out cos diff", "lse max abs", "all vs fp32 GPU", "result"].map((h) => c.bold(h)),
    style: { head: [], border: [], compact: true },
  });
  const outErr = (r: CheckCaseResult) => r.check?.out.maxAbsError ?? Infinity;
  let shown = [...results];
  if (!opts.verbose && results.length > FULL_TABLE_MAX) {
    const failed = results.filter((r) => !r.ok);
    const worstPassing = results.filter((r) => r.ok).sort((a, b) => outErr(b) - outErr(a)).slice(0, 5);
    shown = [...failed, ...worstPassing];
  }
  for (const r of shown) {
    const k = r.check;
    const lengths = r.seqlens.min === r.seqlens.max ? `${r.seqlens.max}` : `${r.seqlens.min}..${r.seqlens.max}${r.seqlens.zeros > 0 ? ` (${r.seqlens.zeros}×0)` : ""}`;
    const g = k !== undefined && "gpu" in k ? k.gpu : undefined;
    const gpu = g === undefined ? "-" : g.out.ok && g.lse.ok ? `ok (${sci(g.out.maxAbsError)})` : c.red(`FAILED (${sci(g.out.maxAbsError)})`);
    t.push([
      r.spec.name,
      r.kernel,
      lengths,
      k === undefined ? "-" : String(k.rows),
      k === undefined ? "-" : sci(k.out.maxAbsError),
      k === undefined ? "-" : sci(k.out.cosDiff),
      k === undefined ? "-" : sci(k.lse.maxAbsError),
      gpu,
      r.ok ? c.green("pass") : c.red("FAIL"),
    ]);
  }
  const passed = results.filter((r) => r.ok).length;
  const failed = results.length - passed;
  const skipped = opts.total - results.length;
  const lines: string[] = [];
  lines.push(c.bold(`flashmla check: flashMlaWithKvcache on ${opts.gpu}, grid ${opts.grid}`));
  lines.push(t.toString());
  if (shown.length < results.length) lines.push(c.dim(`(${results.length - shown.length} more passing cases not listed; --verbose lists all)`));
  for (const r of results.filter((x) => !x.ok)) lines.push(c.red(`FAIL ${r.spec.name}: ${r.error ?? r.check?.message ?? "failed"}`));
  const worst = (pick: (r: CheckCaseResult) => number | undefined) => {
    let best: CheckCaseResult | undefined;
    for (const r of results) if ((pick(r) ?? -1) > (best === undefined ? -1 : (pick(best) ?? -1))) best = r;
    return best === undefined ? "-" : `${sci(pick(best) ?? NaN)} (${best.spec.name})`;
  };
  lines.push(`worst out abs error ${worst((r) => r.check?.out.maxAbsError)}; worst out cos diff ${worst((r) => r.check?.out.cosDiff)}; worst lse abs error ${worst((r) => r.check?.lse.maxAbsError)}`);
  const verdict = failed === 0 && skipped === 0 ? c.green(`${passed} passed, 0 failed`) : c.red(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} not run` : ""}`);
  lines.push(`${results.length} of ${opts.total} cases run: ${verdict}`);
  return `${lines.join("\n")}\n`;
}

function sci(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  return x === 0 ? "0" : x.toExponential(2);
}

