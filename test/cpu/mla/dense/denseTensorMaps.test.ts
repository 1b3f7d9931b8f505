import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { denseKvTensorMapView, denseQTensorMapView } from "../../../../src/mla/dense/denseTensorMaps.js";

// q [b, s_q, h_q, d_qk] contiguous: element strides of a dense tensor (d_qk 576 unless given).
const dense = (s_q: number, h_q: number, d_qk = 576) => [s_q * h_q * d_qk, h_q * d_qk, d_qk, 1];

describe("denseQTensorMapView (the dense kernels' Q tensor map)", () => {
  test("128 heads per KV head: one box is 64 heads of one token", () => {
    const v = denseQTensorMapView({ b: 3, s_q: 2, h_kv: 1, d_qk: 576 }, 128, dense(2, 128), 2);
    assert.deepEqual(v, {
      globalDim: [576, 128, 1, 2, 3],
      // h_kv is 1: its stride is never followed and becomes the dense 128 x 1152 bytes.
      globalStrides: [1152, 128 * 1152, 128 * 1152, 2 * 128 * 1152],
      boxDim: [64, 64, 1, 1, 1],
    });
  });

  test("16 heads: one box is the 16 heads of 4 tokens (tokens past s_q fall outside the tensor)", () => {
    const v = denseQTensorMapView({ b: 128, s_q: 1, h_kv: 1, d_qk: 576 }, 16, dense(1, 16), 2);
    assert.deepEqual(v?.boxDim, [64, 16, 1, 4, 1]);
    assert.deepEqual(v?.globalDim, [576, 16, 1, 1, 128]);
    // s_q is 1: its stride becomes the dense one (16 heads x 1152 bytes).
    assert.deepEqual(v?.globalStrides, [1152, 16 * 1152, 16 * 1152, 16 * 1152]);
  });

  test("one head per KV head and several KV heads: 64 tokens a box, the KV head's stride in heads", () => {
    const v = denseQTensorMapView({ b: 2, s_q: 4, h_kv: 2, d_qk: 576 }, 1, dense(4, 2), 2);
    assert.deepEqual(v?.boxDim, [64, 1, 1, 64, 1]);
    assert.deepEqual(v?.globalStrides, [1152, 1152, 2 * 1152, 8 * 1152]);
  });

  test("a strided q (padded heads) keeps its strides", () => {
    const v = denseQTensorMapView({ b: 2, s_q: 2, h_kv: 1, d_qk: 576 }, 64, [2 * 64 * 640, 64 * 640, 640, 1], 2);
    assert.deepEqual(v?.globalStrides, [1280, 64 * 1280, 64 * 1280, 2 * 64 * 1280]);
  });

  test("head counts a box cannot hold (not dividing 64, not a multiple of it) have no map", () => {
    for (const hpk of [3, 42, 96, 24]) assert.equal(denseQTensorMapView({ b: 1, s_q: 1, h_kv: 1, d_qk: 576 }, hpk, dense(1, hpk), 2), undefined, `heads_per_kv ${hpk}`);
  });

  test("strides TMA cannot take (0 or not a multiple of 16 bytes in a dimension of extent > 1) have no map", () => {
    assert.equal(denseQTensorMapView({ b: 2, s_q: 1, h_kv: 1, d_qk: 576 }, 64, [0, 64 * 576, 576, 1], 2), undefined);
    assert.equal(denseQTensorMapView({ b: 2, s_q: 2, h_kv: 1, d_qk: 576 }, 64, [2 * 64 * 580, 64 * 580, 580, 1], 2), undefined);
  });

  test("d_qk 512 (DeepSeek-V4's head): 512 dims innermost, eight 64-dim boxes a row, 1024-byte rows", () => {
    const v = denseQTensorMapView({ b: 3, s_q: 2, h_kv: 1, d_qk: 512 }, 128, dense(2, 128, 512), 2);
    assert.deepEqual(v, {
      globalDim: [512, 128, 1, 2, 3],
      globalStrides: [1024, 128 * 1024, 128 * 1024, 2 * 128 * 1024],
      boxDim: [64, 64, 1, 1, 1],
    });
    // Extent-1 dims (one head, one KV head, s_q 1) whose view carries stride 0 take the dense 512-dim
    // row's 1024 bytes, not 576's 1152.
    const one = denseQTensorMapView({ b: 2, s_q: 1, h_kv: 1, d_qk: 512 }, 1, [512, 512, 0, 1], 2);
    assert.deepEqual(one, { globalDim: [512, 1, 1, 1, 2], globalStrides: [1024, 1024, 1024, 1024], boxDim: [64, 1, 1, 64, 1] });
    // A 512-wide view of 576-wide rows keeps its strides.
    const cut = denseQTensorMapView({ b: 2, s_q: 2, h_kv: 1, d_qk: 512 }, 64, dense(2, 64), 2);
    assert.deepEqual(cut?.globalDim, [512, 64, 1, 2, 2]);
    assert.deepEqual(cut?.globalStrides, [1152, 64 * 1152, 64 * 1152, 2 * 64 * 1152]);
    assert.equal(denseQTensorMapView({ b: 2, s_q: 1, h_kv: 1, d_qk: 512 }, 64, [0, 64 * 512, 512, 1], 2), undefined, "a batch stride of 0: no map");
  });
});

describe("denseKvTensorMapView (the dense kernels' cache tensor map)", () => {
  test("a [num_blocks, 64, h_kv, d_qk] cache: {d_qk, h_kv, 64 tokens, num_blocks}, boxes of 64 tokens x 64 dims of one KV head", () => {
    assert.deepEqual(denseKvTensorMapView({ h_kv: 2, num_blocks: 5, d_qk: 576 }, [64 * 2 * 576, 2 * 576, 576, 1], 2), {
      globalDim: [576, 2, 64, 5],
      globalStrides: [1152, 2 * 1152, 64 * 2 * 1152],
      boxDim: [64, 1, 64, 1],
    });
    assert.deepEqual(denseKvTensorMapView({ h_kv: 1, num_blocks: 7, d_qk: 512 }, [64 * 512, 512, 512, 1], 2), {
      globalDim: [512, 1, 64, 7],
      globalStrides: [1024, 1024, 64 * 1024],
      boxDim: [64, 1, 64, 1],
    });
    // Padded blocks keep their block stride.
    assert.deepEqual(denseKvTensorMapView({ h_kv: 1, num_blocks: 3, d_qk: 512 }, [65 * 512, 512, 512, 1], 2).globalStrides, [1024, 1024, 65 * 1024]);
  });
});
