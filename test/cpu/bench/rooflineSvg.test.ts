import { test } from "node:test";
import assert from "node:assert/strict";
import { rooflineSvg } from "../../../src/bench/rooflineSvg.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";

const ROOFS = [
  { label: "datasheet", tflops: 989.4, gbPerS: 4800, style: "datasheet" as const },
  { label: "measured", tflops: 767, gbPerS: 4138, style: "measured" as const },
];

function attr(el: string, name: string): number {
  const m = new RegExp(`${name}="([^"]+)"`).exec(el);
  assert.ok(m, `${name} in ${el}`);
  return Number(m[1]);
}

test("rooflineSvg() draws one roof per ceiling with its figures and ridge point", () => {
  const svg = rooflineSvg({ title: "t", roofs: ROOFS, points: [] });
  assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  const roofs = [...svg.matchAll(/<g class="roof"[^>]*>/g)].map((m) => m[0]);
  assert.equal(roofs.length, 2);
  assert.equal(attr(roofs[1], "data-tflops"), 767);
  assert.equal(attr(roofs[1], "data-gbps"), 4138);
  assert.equal(attr(roofs[1], "data-ridge"), 185.4);
  assert.equal(attr(roofs[0], "data-ridge"), 206.1);
  // Each roof is a path of a slope and a flat part: three points, the ridge in the middle.
  const paths = [...svg.matchAll(/<path d="M([\d.,-]+)L([\d.,-]+)L([\d.,-]+)"/g)];
  assert.equal(paths.length, 2);
  for (const p of paths) {
    const [, a, b, c] = p;
    const [ax, ay] = a.split(",").map(Number);
    const [bx, by] = b.split(",").map(Number);
    const [cx, cy] = c.split(",").map(Number);
    assert.ok(ax < bx && bx < cx, "left to right");
    assert.ok(ay > by, "rising slope (SVG y grows downwards)");
    assert.ok(Math.abs(by - cy) < 1e-6, "flat after the ridge");
  }
  assert.match(svg, />measured: 767 TFLOPS, 4138 GB\/s</);
});

test("rooflineSvg() places each point on log-log axes, higher TFLOPS higher up, and labels ours", () => {
  const svg = rooflineSvg({
    title: "MLA <decode> & more",
    roofs: ROOFS,
    points: [
      { label: "dense-compute", intensity: 234.8, tflops: 646, kind: "measured", bound: "compute" },
      { label: "dense-mem-h16", intensity: 30.1, tflops: 125, kind: "measured", bound: "memory" },
      { label: "dense-compute", intensity: 234.8, tflops: 600, kind: "anchor" },
    ],
  });
  const mine = [...svg.matchAll(/<circle class="point measured"[^>]*>/g)].map((m) => m[0]);
  assert.equal(mine.length, 2);
  const [compute, mem] = mine;
  assert.ok(attr(compute, "cx") > attr(mem, "cx"));
  assert.ok(attr(compute, "cy") < attr(mem, "cy"));
  assert.match(compute, /data-case="dense-compute"/);
  assert.match(svg, /<text class="label"[^>]*>dense-mem-h16<\/text>/);
  // The anchor is hollow and tied to our point of the same case.
  assert.equal([...svg.matchAll(/<circle class="point anchor"/g)].length, 1);
  assert.equal([...svg.matchAll(/<line class="anchor-link"/g)].length, 1);
  // Text is escaped.
  assert.match(svg, /MLA &lt;decode&gt; &amp; more/);
});

test("rooflineSvg() gives a group of points one label", () => {
  const points = [1, 2, 3].map((i) => ({ label: `dense-grid-${i}`, intensity: 200 + i, tflops: 300 + i, kind: "measured" as const, group: "dense-grid" }));
  const svg = rooflineSvg({ title: "t", roofs: ROOFS, points });
  assert.equal([...svg.matchAll(/data-group="dense-grid"/g)].length, 3);
  const labels = [...svg.matchAll(/<text class="label"[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
  assert.deepEqual(labels, ["dense-grid (3 cases)"]);
});

test("rooflineSvg() labels an anchor that has no point of ours", () => {
  const svg = rooflineSvg({ title: "t", roofs: ROOFS, points: [{ label: "sparse-v32", intensity: 361, tflops: 401, kind: "anchor" }] });
  assert.match(svg, />sparse-v32 \(FlashMLA only\)</);
});

test("rooflineSvg() needs a roof with positive figures", () => {
  assert.throws(() => rooflineSvg({ title: "t", roofs: [], points: [] }), ArgumentError);
  assert.throws(() => rooflineSvg({ title: "t", roofs: [{ label: "x", tflops: 0, gbPerS: 1, style: "measured" }], points: [] }), ArgumentError);
});
