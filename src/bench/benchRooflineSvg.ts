import { recordRoofs, type BenchRecord } from "./benchRecord.js";
import { rooflineSvg, type RooflinePlotPoint, type RooflinePlotRoof } from "./rooflineSvg.js";

/**
 * The roofline plot of one bench record: the roofs the run quoted its cases against (the same as
 * its ceilings line, both from recordRoofs) and the datasheet's, every timed case at its intensity
 * and achieved TFLOPS, and FlashMLA's anchor for the same case as a hollow point. A function of the
 * record alone, so a saved record can be plotted again.
 */
export function benchRooflineSvg(record: BenchRecord): string {
  const roofs: RooflinePlotRoof[] = [];
  const { datasheet: ds, reference: ref } = recordRoofs(record);
  if (ds !== undefined) roofs.push({ label: "datasheet", tflops: ds.tflops, gbPerS: ds.gbPerS, style: "datasheet" });
  roofs.push({ label: ref.label, tflops: ref.tflops, gbPerS: ref.gbPerS, style: ref.label === "datasheet" ? "datasheet" : ref.label === "practical" ? "practical" : "measured" });

  const points: RooflinePlotPoint[] = [];
  for (const r of record.results) {
    if (r.tflops !== undefined) points.push({ label: r.case, intensity: r.intensity, tflops: r.tflops, kind: "measured", bound: r.bound, ...(r.group !== undefined ? { group: r.group } : {}) });
    if (r.anchor !== undefined) points.push({ label: r.case, intensity: r.intensity, tflops: r.flop / (r.anchor.timeUs * 1e6), kind: "anchor", bound: r.bound });
  }
  const date = record.createdAt.slice(0, 10);
  const commit = record.commit === "unknown" ? "commit unknown" : `commit ${record.commit.slice(0, 10)}${record.commitDirty === true ? "+dirty" : ""}`;
  return rooflineSvg({
    title: `MLA decode roofline: ${record.kernel} on ${record.gpu.name}`,
    subtitle: `${date}, ${commit}, driver ${record.gpu.driverVersion}; whole call (main + combine), median of ${record.settings.iters}; roofs measured with flashmla ceilings`,
    roofs,
    points,
  });
}
