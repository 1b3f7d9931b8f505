import { scaleLog } from "d3-scale";
import { line } from "d3-shape";
import { ArgumentError } from "../errors/ArgumentError.js";
import type { Bound } from "../roofline/roofline.js";

/** One roof of the plot: a compute peak and a bandwidth. */
export interface RooflinePlotRoof {
  label: string;
  tflops: number;
  gbPerS: number;
  /** measured: solid; datasheet: dashed; practical: dotted. */
  style: "measured" | "datasheet" | "practical";
}

/** One call placed on the plot. */
export interface RooflinePlotPoint {
  label: string;
  /** FLOP per byte. */
  intensity: number;
  tflops: number;
  /** measured: our kernel, filled and labelled; anchor: FlashMLA's figure for the same case, hollow. */
  kind: "measured" | "anchor";
  bound?: Bound;
  /** Points of one family (FlashMLA's dense grid) share one label instead of one each. */
  group?: string;
}

/** Options of {@link rooflineSvg}. */
export interface RooflineSvgOptions {
  title: string;
  subtitle?: string;
  roofs: readonly RooflinePlotRoof[];
  points: readonly RooflinePlotPoint[];
  /** @default 960 */
  width?: number;
  /** @default 640 */
  height?: number;
}

const MARGIN = { top: 64, right: 230, bottom: 64, left: 76 };
const COLORS = { compute: "#d95f02", memory: "#1b9e77", anchor: "#777777", roof: "#2c5aa0", grid: "#e4e4e4", text: "#222222" };
const DASH: Record<RooflinePlotRoof["style"], string> = { measured: "", datasheet: "6 4", practical: "2 3" };
const LABEL_GAP = 12;

/**
 * A log-log roofline as a standalone SVG document: FLOP/byte across, TFLOPS up, each roof as
 * min(peak, bandwidth · intensity) with its ridge point, our measured cases as labelled points
 * (coloured by the roof that binds) and FlashMLA's anchors as hollow points. Elements carry data-*
 * attributes (roof figures, case names, coordinates) so tools can read the plot back.
 */
export function rooflineSvg(opts: RooflineSvgOptions): string {
  const fn = "rooflineSvg";
  if (opts.roofs.length === 0) throw new ArgumentError(fn, "opts.roofs", "at least one roof", "none");
  for (const r of opts.roofs) {
    if (!(r.tflops > 0 && r.gbPerS > 0)) throw new ArgumentError(fn, "opts.roofs", "positive tflops and gbPerS", JSON.stringify(r));
  }
  const points = opts.points.filter((p) => p.intensity > 0 && p.tflops > 0 && Number.isFinite(p.intensity) && Number.isFinite(p.tflops));
  const width = opts.width ?? 960;
  const height = opts.height ?? 640;
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;

  const ridges = opts.roofs.map((r) => ridge(r));
  const peak = Math.max(...opts.roofs.map((r) => r.tflops));
  const xs = [...points.map((p) => p.intensity), ...ridges];
  const ys = points.map((p) => p.tflops);
  // Whole decades across, so the ticks read 10, 100, 1000; up to half a decade over the highest roof.
  const x = scaleLog()
    .domain([decadeBelow(Math.min(...xs) / 2), decadeAbove(Math.max(...xs) * 2)])
    .range([0, plotW]);
  const y = scaleLog()
    .domain([decadeBelow(Math.min(peak / 10, ...ys.map((v) => v / 2))), Math.max(peak * 1.6, ...ys.map((v) => v * 1.3))])
    .range([plotH, 0]);
  const [x0, x1] = x.domain();
  const [y0] = y.domain();

  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="${MARGIN.left}" y="26" font-size="17" font-weight="bold" fill="${COLORS.text}">${esc(opts.title)}</text>`);
  if (opts.subtitle !== undefined) out.push(`<text x="${MARGIN.left}" y="46" fill="#555555">${esc(opts.subtitle)}</text>`);
  out.push(`<g transform="translate(${MARGIN.left},${MARGIN.top})">`);

  // Grid and axes.
  const xLabel = x.tickFormat(8, "~g");
  const yLabel = y.tickFormat(8, "~g");
  out.push(`<g class="grid" stroke="${COLORS.grid}">`);
  for (const t of x.ticks()) out.push(`<line x1="${f(x(t))}" x2="${f(x(t))}" y1="0" y2="${plotH}"/>`);
  for (const t of y.ticks()) out.push(`<line x1="0" x2="${plotW}" y1="${f(y(t))}" y2="${f(y(t))}"/>`);
  out.push(`</g>`);
  out.push(`<g class="axis x-axis" fill="${COLORS.text}" text-anchor="middle">`);
  for (const t of x.ticks()) if (xLabel(t) !== "") out.push(`<text x="${f(x(t))}" y="${plotH + 18}">${esc(xLabel(t))}</text>`);
  out.push(`<text x="${f(plotW / 2)}" y="${plotH + 44}" font-size="13">arithmetic intensity (FLOP/byte)</text>`);
  out.push(`</g>`);
  out.push(`<g class="axis y-axis" fill="${COLORS.text}" text-anchor="end">`);
  for (const t of y.ticks()) if (yLabel(t) !== "") out.push(`<text x="-8" y="${f(y(t) + 4)}">${esc(yLabel(t))}</text>`);
  out.push(`<text transform="translate(-52,${f(plotH / 2)}) rotate(-90)" text-anchor="middle" font-size="13">TFLOPS</text>`);
  out.push(`</g>`);
  out.push(`<rect class="frame" width="${plotW}" height="${plotH}" fill="none" stroke="#999999"/>`);

  // Roofs: min(peak, bandwidth·I), starting where the slope enters the plot.
  const path = line<[number, number]>()
    .x((d) => x(d[0]))
    .y((d) => y(d[1]));
  opts.roofs.forEach((r, i) => {
    const rp = ridges[i];
    const start = Math.max(x0, (y0 * 1000) / r.gbPerS);
    const d = path([
      [start, (r.gbPerS * start) / 1000],
      [rp, r.tflops],
      [x1, r.tflops],
    ]);
    out.push(`<g class="roof" data-label="${esc(r.label)}" data-tflops="${r.tflops}" data-gbps="${r.gbPerS}" data-ridge="${f(rp)}">`);
    out.push(`<path d="${d}" fill="none" stroke="${COLORS.roof}" stroke-width="${r.style === "measured" ? 2.2 : 1.4}" stroke-dasharray="${DASH[r.style]}" opacity="${r.style === "measured" ? 1 : 0.7}"/>`);
    out.push(`<line x1="${f(x(rp))}" x2="${f(x(rp))}" y1="${f(y(r.tflops))}" y2="${plotH}" stroke="${COLORS.roof}" stroke-dasharray="1 3" opacity="0.6"/>`);
    out.push(`<text x="${f(x(rp) + 4)}" y="${plotH - 6 - 14 * i}" fill="${COLORS.roof}" font-size="11">ridge ${esc(r.label)} ${f(rp, 0)}</text>`);
    out.push(`<text x="${plotW + 6}" y="${f(y(r.tflops) + 4 + 14 * overlapRank(opts.roofs, i, y))}" fill="${COLORS.roof}" font-size="11">${esc(r.label)}: ${f(r.tflops, 0)} TFLOPS, ${f(r.gbPerS, 0)} GB/s</text>`);
    out.push(`</g>`);
  });

  // Anchors under our points, each tied to our point of the same case by a faint line.
  const mine = points.filter((p) => p.kind === "measured");
  out.push(`<g class="anchors">`);
  for (const p of points.filter((q) => q.kind === "anchor")) {
    const ours = mine.find((m) => m.label === p.label);
    if (ours !== undefined) {
      out.push(`<line class="anchor-link" x1="${f(x(p.intensity))}" y1="${f(y(p.tflops))}" x2="${f(x(ours.intensity))}" y2="${f(y(ours.tflops))}" stroke="${COLORS.anchor}" stroke-dasharray="2 2" opacity="0.7"/>`);
    }
    out.push(`<circle class="point anchor" data-case="${esc(p.label)}" data-intensity="${f(p.intensity, 3)}" data-tflops="${f(p.tflops, 3)}" cx="${f(x(p.intensity))}" cy="${f(y(p.tflops))}" r="5" fill="none" stroke="${COLORS.anchor}" stroke-width="1.5"><title>FlashMLA ${esc(p.label)}: ${f(p.tflops, 1)} TFLOPS</title></circle>`);
  }
  out.push(`</g>`);

  // Our points; one label per ungrouped point and one per group, pushed apart with a leader line.
  out.push(`<g class="points">`);
  const labels: Array<{ text: string; px: number; py: number; color: string }> = [];
  const groups = new Map<string, RooflinePlotPoint[]>();
  for (const p of mine) {
    const color = p.bound === "memory" ? COLORS.memory : COLORS.compute;
    const grouped = p.group !== undefined;
    out.push(`<circle class="point measured" data-case="${esc(p.label)}"${grouped ? ` data-group="${esc(p.group!)}"` : ""} data-intensity="${f(p.intensity, 3)}" data-tflops="${f(p.tflops, 3)}" cx="${f(x(p.intensity))}" cy="${f(y(p.tflops))}" r="${grouped ? 3.5 : 4.5}" fill="${color}"${grouped ? ' fill-opacity="0.6"' : ""}><title>${esc(p.label)}: ${f(p.tflops, 1)} TFLOPS at ${f(p.intensity, 1)} FLOP/B</title></circle>`);
    if (grouped) groups.set(p.group!, [...(groups.get(p.group!) ?? []), p]);
    else labels.push({ text: p.label, px: x(p.intensity), py: y(p.tflops), color });
  }
  // An anchor with no point of ours (a case we cannot run yet) is labelled itself, in grey.
  for (const p of points.filter((q) => q.kind === "anchor" && !mine.some((m) => m.label === q.label))) {
    labels.push({ text: `${p.label} (FlashMLA only)`, px: x(p.intensity), py: y(p.tflops), color: COLORS.anchor });
  }
  for (const [name, members] of groups) {
    // Label the group at its highest point, where the eye starts.
    const top = members.reduce((a, m) => (m.tflops > a.tflops ? m : a));
    labels.push({ text: `${name} (${members.length} cases)`, px: x(top.intensity), py: y(top.tflops), color: top.bound === "memory" ? COLORS.memory : COLORS.compute });
  }
  labels.sort((a, b) => a.py - b.py);
  const placed: Array<{ x: number; y: number }> = [];
  for (const l of labels) {
    let ly = l.py + 4;
    for (const other of placed) if (Math.abs(other.x - l.px) < 150 && Math.abs(other.y - ly) < LABEL_GAP) ly = other.y + LABEL_GAP;
    placed.push({ x: l.px, y: ly });
    if (Math.abs(ly - (l.py + 4)) > 2) out.push(`<line class="leader" x1="${f(l.px + 4)}" y1="${f(l.py)}" x2="${f(l.px + 10)}" y2="${f(ly - 4)}" stroke="${l.color}" opacity="0.6"/>`);
    out.push(`<text class="label" x="${f(l.px + 12)}" y="${f(ly)}" fill="${l.color}" font-size="11">${esc(l.text)}</text>`);
  }
  out.push(`</g>`);

  // Legend, right of the plot.
  const lx = plotW + 10;
  const ly = plotH - 70;
  out.push(`<g class="legend" font-size="11" fill="${COLORS.text}">`);
  out.push(`<circle cx="${lx + 5}" cy="${ly}" r="4.5" fill="${COLORS.compute}"/><text x="${lx + 16}" y="${ly + 4}">ours, compute-bound case</text>`);
  out.push(`<circle cx="${lx + 5}" cy="${ly + 18}" r="4.5" fill="${COLORS.memory}"/><text x="${lx + 16}" y="${ly + 22}">ours, memory-bound case</text>`);
  out.push(`<circle cx="${lx + 5}" cy="${ly + 36}" r="5" fill="none" stroke="${COLORS.anchor}" stroke-width="1.5"/><text x="${lx + 16}" y="${ly + 40}">FlashMLA on H200 (same harness)</text>`);
  out.push(`</g>`);
  out.push(`</g>`);
  out.push(`</svg>`);
  return `${out.join("\n")}\n`;
}

function decadeBelow(v: number): number {
  return 10 ** Math.floor(Math.log10(v));
}

function decadeAbove(v: number): number {
  return 10 ** Math.ceil(Math.log10(v));
}

function ridge(r: RooflinePlotRoof): number {
  return (r.tflops * 1e12) / (r.gbPerS * 1e9);
}

/** How many earlier roofs have a peak label within a line of this one's (to stack the labels). */
function overlapRank(roofs: readonly RooflinePlotRoof[], i: number, y: (v: number) => number): number {
  let rank = 0;
  for (let j = 0; j < i; j++) if (Math.abs(y(roofs[j].tflops) - y(roofs[i].tflops)) < LABEL_GAP) rank++;
  return rank;
}

function f(v: number, digits = 1): string {
  return Number(v.toFixed(digits)).toString();
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
