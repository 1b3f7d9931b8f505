import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { config } from "../../../../src/config.js";
import { chooseKernel } from "../../../../src/mla/chooseKernel.js";
import { checkFacts, KERNEL_REGISTRY, TEST_KERNEL_REGISTRY, type KernelName, type KernelRow } from "../../../../src/mla/contract/kernelRegistry.js";
import { DENSE_FORMS, denseKernelName } from "../../../../src/mla/dense/chooseDenseKernel.js";
import { SPARSE_PLANS, sparseKernelName } from "../../../../src/mla/sparse/chooseSparseKernel.js";

// The registry against the kernel sources, without a GPU: each row's cubin is a translation unit under
// kernels/ (named as scripts/buildKernels.mjs names it), that unit defines the row's entry point, and a
// main kernel's unit exports the params layout and the launch facts the row expects.

const kernelRoot = path.join(config.packageRoot, "kernels");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith(".cu") ? [path.relative(kernelRoot, p)] : [];
  });
}

/** scripts/buildKernels.mjs's rule: the file's name, or <path>_<variant> for kernels/<arch>/decode/<path>/inst/<variant>.cu. */
function cubinName(src: string): string {
  const parts = src.split(path.sep);
  const base = path.basename(src, ".cu");
  const inst = parts.lastIndexOf("inst");
  if (inst < 1) return base;
  return [...parts.slice(parts.indexOf("decode") + 1, inst), base].join("_");
}

const units = new Map(sources(kernelRoot).map((src) => [cubinName(src), readFileSync(path.join(kernelRoot, src), "utf8")]));
const unitPaths = new Map(sources(kernelRoot).map((src) => [cubinName(src), src]));
const rows = [...Object.entries(KERNEL_REGISTRY), ...Object.entries(TEST_KERNEL_REGISTRY)] as Array<[KernelName, KernelRow]>;

test("every registry row names a kernel source and an entry point it defines", () => {
  for (const [name, row] of rows) {
    const text = units.get(row.cubin);
    assert.ok(text !== undefined, `${name}: no translation unit builds ${row.cubin}.cubin (have ${[...units.keys()].join(", ")})`);
    assert.match(text, new RegExp(`extern "C" __global__[^;{]*\\b${row.symbol}\\(`), `${name}: ${row.cubin} defines ${row.symbol}`);
    if (row.params !== undefined) {
      assert.match(text, new RegExp(`MLA_EXPORT_LAYOUT\\(${row.params.table}, mla::${row.params.struct.structName},`), `${name}: ${row.cubin} exports ${row.params.table} of ${row.params.struct.structName}`);
    }
  }
});

test("every main kernel's unit exports mla_kernel_facts with the row's cluster size; other units export none", () => {
  for (const [name, row] of rows) {
    const text = units.get(row.cubin) ?? "";
    const facts = /mla_kernel_facts\[3\] = \{[^,}]+,[^,}]+,\s*(\d+)\s*\}/.exec(text);
    if (!row.facts) {
      assert.equal(facts, null, `${name}: ${row.cubin} exports no launch facts`);
      continue;
    }
    assert.ok(facts !== null, `${name}: ${row.cubin} exports mla_kernel_facts`);
    assert.equal(Number(facts[1]), row.clusterX, `${name}: cluster x`);
    assert.equal(row.params?.table, "mla_params_layout", `${name}: a main kernel's layout table`);
  }
});

test("KERNEL_REGISTRY holds what ships, TEST_KERNEL_REGISTRY exactly what kernels/testing/ builds", () => {
  const underTesting = (row: KernelRow) => (unitPaths.get(row.cubin) ?? "").split(path.sep)[0] === "testing";
  for (const [name, row] of Object.entries(KERNEL_REGISTRY) as Array<[string, KernelRow]>) {
    assert.ok(!underTesting(row) && row.testOnly === undefined, `${name} ships`);
  }
  for (const [name, row] of Object.entries(TEST_KERNEL_REGISTRY) as Array<[string, KernelRow]>) {
    assert.ok(underTesting(row) && row.testOnly === true, `${name} is built from kernels/testing/`);
    assert.ok(!(name in KERNEL_REGISTRY), name);
  }
  assert.equal(config.testKernelDir, path.join(config.kernelDir, "testing"));
});

test("every kernel the choosers can pick, forced or not, is a registry row", () => {
  for (const form of DENSE_FORMS) for (const dtype of ["bf16", "fp16"] as const) for (const d_qk of [576, 512]) assert.ok(denseKernelName(form, dtype, d_qk) in KERNEL_REGISTRY);
  for (const plan of SPARSE_PLANS) assert.ok(sparseKernelName(plan) in KERNEL_REGISTRY);
  assert.equal(chooseKernel({ kind: "dense", b: 128, s_q: 1, h_q: 128, h_kv: 1 }), "dense_pipe_bf16");
  assert.equal(chooseKernel({ kind: "dense", b: 128, s_q: 1, h_q: 128, h_kv: 1, dtype: "fp16" }, { denseForm: "fast" }), "dense_fast_fp16");
  assert.equal(chooseKernel({ kind: "sparse", b: 1, s_q: 1, h_q: 64 }, { sparsePlan: "m64" }), "sparse_m64_bf16");
});

test("checkFacts() takes a cubin's {smem, threads, cluster x} that agree with its row and names what disagrees", () => {
  const row = { cubin: "sparse_h128x_bf16", threads: 512, clusterX: 2 };
  assert.equal(checkFacts("sparse_h128x_bf16", row, Int32Array.from([211968, 512, 2])), 211968);
  assert.throws(
    () => checkFacts("sparse_h128x_bf16", row, Int32Array.from([211968, 384, 2])),
    /^Error: sparse_h128x_bf16\.cubin \(registry row sparse_h128x_bf16\): the cubin was built for 384 threads and clusters of 2, the registry launches 512 threads and clusters of 2 \(kernels\/ and src\/mla\/contract\/kernelRegistry\.ts must change together; rebuild with npm run build:kernels\)$/,
  );
  assert.throws(() => checkFacts("x", row, Int32Array.from([211968, 512, 1])), /built for 512 threads and clusters of 1, the registry launches 512 threads and clusters of 2/);
  assert.throws(() => checkFacts("x", row, Int32Array.from([211968, 512])), /mla_kernel_facts has 2 entries, expected 3 \{dynamic smem bytes, threads, cluster x\}/);
  assert.throws(() => checkFacts("x", row, Int32Array.from([0, 512, 2])), /gives 0 bytes of dynamic shared memory, expected > 0/);
});
