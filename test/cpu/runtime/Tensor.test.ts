import { test } from "node:test";
import assert from "node:assert/strict";
import { Rng } from "../../../src/numeric/random.js";
import { contiguousStrides, Tensor } from "../../../src/runtime/Tensor.js";

// isContiguous walks the strides without building contiguousStrides' array (it runs on every dense
// call); it must still mean exactly "every dimension of extent > 1 has contiguousStrides' stride".
test("Tensor.isContiguous() agrees with contiguousStrides on random views (extents 0-4, strides off by -1..2)", () => {
  const rng = new Rng(2101);
  const base = Tensor.zerosHost([4096], "f32");
  let contiguous = 0;
  for (let i = 0; i < 20000; i++) {
    const rank = rng.int(0, 5);
    const shape = Array.from({ length: rank }, () => [0, 1, 1, 2, 3, 4][rng.int(0, 6)]);
    const want = contiguousStrides(shape);
    const strides = want.map((s) => (rng.uniform() < 0.3 ? Math.max(0, s + rng.int(-1, 3)) : s));
    const expected = shape.every((n, d) => n === 1 || strides[d] === want[d]);
    assert.equal(base.view(shape, strides).isContiguous(), expected, `shape [${shape}] strides [${strides}]`);
    if (expected) contiguous++;
  }
  // Both answers occur often enough for the comparison to mean something.
  assert.ok(contiguous > 2000 && contiguous < 18000, `${contiguous} of 20000 views contiguous`);
});
