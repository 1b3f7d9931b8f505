import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import Table from "cli-table3";
import { cliIo, type CliIo } from "../../bench/cliIo.js";
import { DCP_BENCH_CASES, DCP_COMM_MODEL, runDcpBench, type DcpBenchCase, type DcpBenchRow, type DcpCommModel } from "../../bench/dcpBench.js";
import { gpuEnvironment, type GpuEnvironment } from "../../bench/gpuEnvironment.js";
import { probeGpu } from "../../bench/probeGpu.js";
import { Stream } from "../../runtime/Stream.js";
import { guarded, noGpuFailure, type GpuCommandDeps } from "./bench.js";
import { USAGE_EXIT_CODE, reportCommanderErrors, reportFailure } from "../cliErrors.js";
import { fmt, intAtLeast } from "../options.js";

interface DcpBenchOptions {
  case: string;
  ranks: number[];
  iters: number;
  json?: string;
}

/** The `schema` of the record `flashmla dcp-bench --json FILE` writes. */
export const DCP_BENCH_RECORD_SCHEMA = "flashmla-dcp-bench/1";

/** What `flashmla dcp-bench --json FILE` writes: one case at each rank count, on one GPU. */
export interface DcpBenchRecord {
  schema: typeof DCP_BENCH_RECORD_SCHEMA;
  createdAt: string;
  gpu: GpuEnvironment;
  case: DcpBenchCase;
  /** The collectives' cost model behind every row's commUs: assumed, since one GPU cannot time them. */
  commModel: DcpCommModel & { source: "modeled, not measured" };
  rows: DcpBenchRow[];
}

const CASE_NAMES = DCP_BENCH_CASES.map((c) => c.name);

const EXAMPLES = `
Examples:
  One decode layer of dcp-long split over 1, 2, 4 and 8 ranks:
    $ flashmla dcp-bench
  The MTP case (s_q = 2, causal) at 1, 2 and 4 ranks, 100 timed calls each:
    $ flashmla dcp-bench --case dcp-long-mtp --ranks 1,2,4 --iters 100
  With the JSON record:
    $ flashmla dcp-bench --json bench/results/dcp-h200.json

Cases:
${DCP_BENCH_CASES.map((c) => `  ${c.name.padEnd(14)} ${caseShape(c)}`).join("\n")}
Each rank count N runs, on this one GPU, what one rank of N runs: flashMlaWithKvcache on its shard of
every request (ceil(s_k / N) tokens; sparse: the index entries of its 1/N of the pages, the others -1;
measured), and for N > 1 the merge of the N partial outputs
(dcpMerge; measured). CUDA events, median of --iters. The collectives between ranks are modeled, not
measured: each costs ${DCP_COMM_MODEL.latencyUs} µs plus its bytes at ${DCP_COMM_MODEL.busGBs} GB/s bus bandwidth (assumed H200 NVLink figures).
step = decode + merge + all-gather; speed-up = the one-rank decode over step; floor = one rank's KV
bytes at 4485 GB/s (our ceilings kernel on an H200) plus the reduce-scatter form's communication.
With --json FILE the record goes to FILE and the table to stdout; on a failure stdout is { "error": … }.
Exit status: 0 ok, 1 no GPU or a failure, ${USAGE_EXIT_CODE} bad command line.`;

/**
 * Adds `dcp-bench` to `program`: times one decode layer of a decode-context-parallel case as each rank
 * of N would run it (decode of its shard and the merge, measured; the collectives, modeled) and prints
 * the step time and speed-up per rank count.
 */
export function registerDcpBenchCommand(program: Command, deps: GpuCommandDeps = {}): Command {
  const exit = deps.exit ?? ((code: number): never => process.exit(code));
  const cmd = program
    .command("dcp-bench")
    .description("Time one decode layer split over N ranks (decode-context parallel) on one GPU: decode and merge measured, communication modeled")
    .addOption(new Option("--case <name>", "which case").choices(CASE_NAMES).default(CASE_NAMES[0]))
    .addOption(new Option("--ranks <list>", "rank counts, comma-separated, including 1 (the speed-up's baseline)").argParser(rankList).default([1, 2, 4, 8], "1,2,4,8"))
    .addOption(new Option("--iters <n>", "timed calls per measurement (median of these; at least 5)").argParser(intAtLeast(5)).default(40))
    .addOption(new Option("--json <file>", "also write the JSON record to FILE"))
    .addHelpText("after", EXAMPLES);
  reportCommanderErrors(cmd, exit, "dcp-bench");

  cmd.action(async (opts: DcpBenchOptions) => {
    const io = cliIo(cmd);
    const json = opts.json !== undefined;
    const probe = (deps.probeGpu ?? probeGpu)();
    if (!probe.ok) return exit(reportFailure(io, "dcp-bench", noGpuFailure("dcp-bench", probe.reason), json));
    const device = probe.device;
    const code = guarded(io, "dcp-bench", json, () => {
      const c = DCP_BENCH_CASES.find((x) => x.name === opts.case)!;
      const env = gpuEnvironment(device);
      const stream = Stream.create(device.ordinal);
      let rows: DcpBenchRow[];
      try {
        rows = runDcpBench(c, { device, stream, ranks: opts.ranks, iters: opts.iters });
      } finally {
        stream.dispose();
      }
      const record = dcpBenchRecord(env, c, rows);
      // The file first: a failure to write it is reported before any table.
      if (opts.json !== undefined) writeRecord(opts.json, record);
      io.out(dcpBenchText(record, io.colors));
      if (opts.json !== undefined) io.out(`wrote ${opts.json}\n`);
      return 0;
    });
    if (code !== 0) exit(code);
  });
  return cmd;
}

/** The record of one `flashmla dcp-bench` run. */
export function dcpBenchRecord(gpu: GpuEnvironment, c: DcpBenchCase, rows: readonly DcpBenchRow[], createdAt = new Date()): DcpBenchRecord {
  return {
    schema: DCP_BENCH_RECORD_SCHEMA,
    createdAt: createdAt.toISOString(),
    gpu,
    case: c,
    commModel: { ...DCP_COMM_MODEL, source: "modeled, not measured" },
    rows: [...rows],
  };
}

/** The text `flashmla dcp-bench` prints: a title, one table row per rank count, and what is modeled. */
export function dcpBenchText(record: DcpBenchRecord, colors: CliIo["colors"]): string {
  const { case: c, gpu, commModel } = record;
  // The long headers take two lines, so that the table fits in 125 columns.
  const head = ["ranks", "tokens/rank", "decode µs\n(median)", "merge µs", "comm µs all-gather\n(modeled)", "comm µs reduce-scatter\n(modeled)", "step µs", "speed-up", "floor µs"];
  const t = new Table({ head: head.map((h) => h.split("\n").map((l) => colors.bold(l)).join("\n")), style: { head: [], border: [], compact: true } });
  for (const r of record.rows) {
    t.push([
      String(r.ranks),
      String(r.localTokens),
      fmt(r.decodeUs.median, 1),
      r.mergeUs === undefined ? "-" : fmt(r.mergeUs.median, 1),
      fmt(r.commUs.allGather, 1),
      fmt(r.commUs.reduceScatter, 1),
      fmt(r.stepUs, 1),
      `${fmt(r.speedup, 2)}×`,
      fmt(r.floorUs, 1),
    ]);
  }
  const title = `${colors.bold(`flashmla dcp-bench: ${c.name}`)} (${caseShape(c)}) on ${gpu.name} (${gpu.smCount} SMs, driver ${gpu.driverVersion})`;
  const note = `communication is modeled on one GPU (${commModel.latencyUs} µs latency + bytes at ${commModel.busGBs} GB/s bus bandwidth per collective); the two-GPU run measures it`;
  return `${title}\n${t.toString()}\n${colors.dim(note)}\n`;
}

/** commander argParser: comma-separated integers >= 1 that include 1, ascending and without repeats. */
function rankList(value: string): number[] {
  const ranks = value.split(",").map((s) => (/^\d+$/.test(s.trim()) ? Number(s) : NaN));
  if (ranks.some((n) => !Number.isSafeInteger(n) || n < 1)) throw new InvalidArgumentError("expected comma-separated integers >= 1, e.g. 1,2,4,8.");
  if (!ranks.includes(1)) throw new InvalidArgumentError("expected the list to include 1, the one-rank decode the speed-up is over.");
  return [...new Set(ranks)].sort((a, b) => a - b);
}

function writeRecord(file: string, record: DcpBenchRecord): void {
  mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`);
}

/** "b=16 h_q=128 s_q=2 s_k=131072 causal", with the sparse cases' topk. */
function caseShape(c: DcpBenchCase): string {
  return `b=${c.b} h_q=${c.h_q} s_q=${c.s_q} s_k=${c.s_k}${c.topk !== undefined ? ` topk=${c.topk} sparse FP8` : ""}${c.causal ? " causal" : ""}`;
}
