import { Command, Option } from "commander";
import Table from "cli-table3";
import { BenchProgress, progressMode } from "../../bench/BenchProgress.js";
import { CeilingsCache, type CeilingsRecord } from "../../bench/CeilingsCache.js";
import { cliIo } from "../../bench/cliIo.js";
import { gpuEnvironment, type GpuEnvironment } from "../../bench/gpuEnvironment.js";
import { probeGpu } from "../../bench/probeGpu.js";
import { resolveCeilings } from "../../bench/resolveCeilings.js";
import { gpuSpecFromName, type GpuSpec } from "../../roofline/gpus.js";
import { ridgePoint } from "../../roofline/roofline.js";
import { guarded, noGpuFailure, type GpuCommandDeps } from "./bench.js";
import { FAILURE_EXIT_CODE, USAGE_EXIT_CODE, reportCommanderErrors, reportFailure } from "../cliErrors.js";
import { fmt, intAtLeast } from "../options.js";

interface CeilingsOptions {
  fresh?: boolean;
  iters: number;
  json?: boolean;
}

const EXAMPLES = `
Examples:
  This GPU's ceilings (measured once, then read from the cache):
    $ flashmla ceilings
  Measure again, with 50 timed launches per kernel:
    $ flashmla ceilings --fresh --iters 50
  As JSON:
    $ flashmla ceilings --json

Kernels (kernels/bench/ceilings.cu): a 1 GiB device-to-device copy with 16-byte vector accesses (bytes
read + written), a read-only stream of the same buffer, and a bf16 wgmma m64n256k16 loop with both
operands in shared memory on every SM. CUDA events, median of --iters after warm-up. The cache is
~/.cache/flashmla-ts/ceilings.json (FLASHMLA_CACHE_DIR overrides), keyed by GPU name and driver.
With --json, stdout is one JSON document: the record, or { "error": … } on a failure.
Exit status: 0 ok, 1 no GPU or a failure, ${USAGE_EXIT_CODE} bad command line.`;

/**
 * Adds `ceilings` to `program`: measures (or reads from the cache) this GPU's copy and read
 * bandwidth and bf16 tensor-core rate with our own kernels, and prints them beside the datasheet.
 */
export function registerCeilingsCommand(program: Command, deps: GpuCommandDeps = {}): Command {
  const exit = deps.exit ?? ((code: number): never => process.exit(code));
  const cmd = program
    .command("ceilings")
    .description("Measure this GPU's copy bandwidth and bf16 tensor-core rate with our own kernels; print them beside the datasheet")
    .addOption(new Option("--fresh", "measure even when the cache holds this GPU and driver"))
    .addOption(new Option("--iters <n>", "timed launches per kernel (at least 20)").argParser(intAtLeast(20)).default(30))
    .addOption(new Option("--json", "print the record as JSON"))
    .addHelpText("after", EXAMPLES);
  reportCommanderErrors(cmd, exit, "ceilings");

  cmd.action(async (opts: CeilingsOptions) => {
    const io = cliIo(cmd);
    const json = opts.json === true;
    const probe = (deps.probeGpu ?? probeGpu)();
    if (!probe.ok) return exit(reportFailure(io, "ceilings", noGpuFailure("ceilings", probe.reason), json));
    const device = probe.device;
    const code = guarded(io, "ceilings", json, () => {
      const cache = deps.cache ?? new CeilingsCache();
      const env = gpuEnvironment(device);
      const progress = new BenchProgress(progressMode(deps.progress !== false), io.err);
      progress.start(4 * opts.iters, "copy, read, wgmma, driver copy");
      let resolved;
      try {
        resolved = resolveCeilings(device, env, { fresh: opts.fresh === true, iters: opts.iters, cache, onProgress: () => progress.tick() });
      } finally {
        progress.stop();
      }
      const spec = gpuSpecFromName(env.name);
      if (opts.json === true) {
        io.out(`${JSON.stringify({ source: resolved.source, cacheFile: cache.file, gpu: env, ...resolved.record }, null, 2)}\n`);
        return 0;
      }
      io.out(ceilingsText(resolved.record, env, spec, { source: resolved.source, cacheFile: cache.file, colors: io.colors }));
      if (resolved.cacheError !== undefined) io.out(io.colors.dim(`note: could not write the cache: ${resolved.cacheError}\n`));
      return 0;
    });
    if (code !== 0) exit(code);
  });
  return cmd;
}

/**
 * The text `flashmla ceilings` prints: each measured ceiling beside the datasheet figure for the
 * GPU (when the table in src/roofline/gpus.ts knows it), and the ridge points.
 */
export function ceilingsText(
  rec: CeilingsRecord,
  env: Pick<GpuEnvironment, "name" | "smCount" | "maxSmClockMhz" | "driverVersion">,
  spec: GpuSpec | undefined,
  opts: { source: "this run" | "cache"; cacheFile: string; colors: ReturnType<typeof cliIo>["colors"] },
): string {
  const c = opts.colors;
  const pct = (x: number, of: number | undefined) => (of === undefined ? "-" : `${fmt((100 * x) / of, 1)} %`);
  const t = new Table({ head: ["ceiling", "measured", "datasheet", "of datasheet", "median µs", "p90 µs"].map((h) => c.bold(h)), style: { head: [], border: [], compact: true } });
  const d = rec.detail;
  t.push(["bf16 tensor cores (wgmma loop, all SMs)", `${fmt(rec.gemmTflops, 0)} TFLOPS`, spec === undefined ? "-" : `${fmt(spec.datasheetTflops, 0)} TFLOPS`, pct(rec.gemmTflops, spec?.datasheetTflops), fmt(d.wgmmaUs.median, 1), fmt(d.wgmmaUs.p90, 1)]);
  t.push(["device-to-device copy (read + write)", `${fmt(rec.copyGbPerS, 0)} GB/s`, spec === undefined ? "-" : `${fmt(spec.datasheetGbPerS, 0)} GB/s`, pct(rec.copyGbPerS, spec?.datasheetGbPerS), fmt(d.copyUs.median, 1), fmt(d.copyUs.p90, 1)]);
  t.push(["read-only stream", `${fmt(rec.readGbPerS, 0)} GB/s`, spec === undefined ? "-" : `${fmt(spec.datasheetGbPerS, 0)} GB/s`, pct(rec.readGbPerS, spec?.datasheetGbPerS), fmt(d.readUs.median, 1), fmt(d.readUs.p90, 1)]);
  if (d.driverCopyGbPerS !== undefined) {
    t.push([c.dim("driver copy (cuMemcpyDtoD), for comparison"), c.dim(`${fmt(d.driverCopyGbPerS, 0)} GB/s`), "", pct(d.driverCopyGbPerS, spec?.datasheetGbPerS), "", ""]);
  }
  const lines: string[] = [];
  lines.push(`${c.bold(`Ceilings of ${env.name}`)} (${env.smCount} SMs, max SM clock ${env.maxSmClockMhz} MHz, driver ${env.driverVersion})`);
  lines.push(t.toString());
  const ridge = ridgePoint(rec.gemmTflops, rec.readGbPerS);
  const dsRidge = spec === undefined ? "" : `; datasheet ${fmt(ridgePoint(spec.datasheetTflops, spec.datasheetGbPerS), 1)}`;
  lines.push(`ridge point: ${fmt(ridge, 1)} FLOP/byte (measured TFLOPS over read GB/s)${dsRidge}`);
  lines.push(
    c.dim(
      `${opts.source === "cache" ? `from the cache (measured ${rec.measuredAt})` : `measured now (${rec.detail.copyUs.n} timed launches each)`}; cache: ${opts.cacheFile}` +
        (spec === undefined ? `; no datasheet figures for '${env.name}'` : ""),
    ),
  );
  return `${lines.join("\n")}\n`;
}


