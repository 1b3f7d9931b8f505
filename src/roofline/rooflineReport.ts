import { gpuCeilings, mmaFlopPerClockPerSm, referenceCeiling, type Ceiling, type GpuSpec } from "./gpus.js";
import { mlaCost, sparseFormatDims, type MlaCost, type MlaShape } from "./mlaCost.js";
import { measuredPoint, roofline, type Bound, type MeasuredPoint, type RooflinePoint } from "./roofline.js";
import { sparseCycleBudget, type SparseCycleBudget } from "./sparseCycles.js";

/** One roof of the GPU with the call placed under it. */
export type PlacedCeiling = Ceiling & RooflinePoint;

/** What `flashmla roofline` prints, as data (also its `--json` output). */
export interface RooflineReport {
  shape: MlaShape;
  cost: MlaCost;
  gpu: Pick<GpuSpec, "key" | "name" | "sms" | "maxSmClockMhz" | "peakClockMhz">;
  /** Every roof known for the GPU, most optimistic first. */
  ceilings: PlacedCeiling[];
  /** The label of the roof achieved figures are quoted against (measured where known). */
  reference: Ceiling["label"];
  /** The roof that binds under the reference roof: the one answer every command quotes for the call. */
  bound: Bound;
  /** A measured time for the call, turned into figures against the reference roof. */
  measured?: MeasuredPoint;
  /** Sparse only: the per-token cycle budget, its ceilings scaled by the reference peak. */
  cycleBudget?: SparseCycleBudget & {
    /** Ideal time per row of the budget: max(FLOP / (peak·fraction), bytes / bandwidth), in µs. */
    idealUs: number[];
  };
}

export interface RooflineReportOptions {
  /** A time measured for this call, in µs (a benchmark result or an anchor). */
  measuredTimeUs?: number;
  /** Query heads one CTA of the sparse kernel computes. @default 64 */
  hPerCta?: number;
}

/**
 * Places one MLA decode call on `gpu`'s roofline: FLOPs, bytes and intensity, then under each
 * known roof the ridge point, the binding roof and the ideal time; for a sparse FP8 call also the
 * seed's per-token cycle budget with and without crossover, for its token format's dims (V3.2: 576 + 512
 * dims, 512 quantized; MODEL1: 512 + 512, 448 quantized).
 */
export function rooflineReport(shape: MlaShape, gpu: GpuSpec, options: RooflineReportOptions = {}): RooflineReport {
  const cost = mlaCost(shape);
  const ceilings = gpuCeilings(gpu).map((c) => ({ ...c, ...roofline(cost, c) }));
  const ref = referenceCeiling(gpu);
  const report: RooflineReport = {
    shape,
    cost,
    gpu: { key: gpu.key, name: gpu.name, sms: gpu.sms, maxSmClockMhz: gpu.maxSmClockMhz, peakClockMhz: gpu.peakClockMhz },
    ceilings,
    reference: ref.label,
    bound: roofline(cost, ref).bound,
  };
  if (options.measuredTimeUs !== undefined) report.measured = measuredPoint(cost, options.measuredTimeUs, ref);
  if (shape.kind === "sparse") {
    const dims = sparseFormatDims(shape);
    const budget = sparseCycleBudget({
      h_q: shape.h_q,
      hPerCta: options.hPerCta,
      d_qk: dims.d_qk,
      d_v: dims.d_v,
      dequantElements: dims.quantizedDims,
      mmaFlopPerClock: mmaFlopPerClockPerSm(gpu),
      peakTflops: ref.tflops,
    });
    const idealUs = budget.rows.map((r) =>
      Math.max(cost.flop / (ref.tflops * r.fractionOfPeak * 1e6), cost.bytes / (ref.gbPerS * 1e3)),
    );
    report.cycleBudget = { ...budget, idealUs };
  }
  return report;
}
