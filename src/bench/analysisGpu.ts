import { GPUS, getGpuSpec, gpuSpecFromName, type GpuKey, type GpuSpec } from "../roofline/gpus.js";
import type { CeilingsCache, CeilingsRecord } from "./CeilingsCache.js";

/** The figures an analysis (`flashmla roofline`, `flashmla start` without a GPU) uses for one GPU model. */
export interface AnalysisGpu {
  spec: GpuSpec;
  /** Where the measured roofs come from, in words; undefined when only the datasheet is known. */
  measuredSource?: string;
  /** The cached measurement laid over the table's figures, when there is one. */
  cached?: CeilingsRecord;
}

/**
 * GPU `key`'s spec with the measured ceilings a bench or ceilings run on this machine left in
 * `cache` (the newest record of a GPU of that model), else the table's own. The bench table and
 * its plot quote the run's measured ceilings; reading them back here keeps the analysis commands on
 * the same roofs, so one run's figures never appear against two different ceilings.
 */
export function analysisGpu(key: GpuKey, cache?: Pick<CeilingsCache, "all">): AnalysisGpu {
  let newest: CeilingsRecord | undefined;
  for (const r of safeRecords(cache)) {
    if (gpuSpecFromName(r.gpuName)?.key !== key) continue;
    if (newest === undefined || r.measuredAt > newest.measuredAt) newest = r;
  }
  if (newest === undefined) {
    const spec = GPUS[key];
    return { spec, ...(spec.measured?.source !== undefined ? { measuredSource: spec.measured.source } : {}) };
  }
  const source = `flashmla ceilings on this machine's ${newest.gpuName} (driver ${newest.driverVersion}, ${newest.measuredAt.slice(0, 10)})`;
  const spec = getGpuSpec(key, { gemmTflops: newest.gemmTflops, copyGbPerS: newest.copyGbPerS, readGbPerS: newest.readGbPerS, source });
  return { spec, measuredSource: source, cached: newest };
}

function safeRecords(cache: Pick<CeilingsCache, "all"> | undefined): CeilingsRecord[] {
  if (cache === undefined) return [];
  try {
    return cache.all();
  } catch {
    // An unreadable cache only costs the measured figures; the table's stand in.
    return [];
  }
}
