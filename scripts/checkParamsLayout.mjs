// Checks the host/device contract without a GPU: compiles kernels/mla/params.h into a small host
// program (nvcc) that prints sizeof and every field offset of each params struct, and compares them with
// the mirrors in src/mla/contract/params.ts and D_V with src/mla/contract/shape.ts (built to dist/). On
// the GPU the same check runs at module load against the tables each cubin exports; this catches a drift
// in CI, before any GPU sees it.
// Usage (after `npm run build`): node scripts/checkParamsLayout.mjs
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const params = await import(path.join(root, "dist/src/mla/contract/params.js"));
const { D_V } = await import(path.join(root, "dist/src/mla/contract/shape.js"));
// params.h offsets macro -> C++ struct -> TS mirror.
const STRUCTS = [
  ["MLA_OFFSETS_SCHED", "SchedParams", params.SchedParamsStruct],
  ["MLA_OFFSETS_DENSE", "DenseParams", params.DenseParamsStruct],
  ["MLA_OFFSETS_SPARSE", "SparseParams", params.SparseParamsStruct],
  ["MLA_OFFSETS_COMBINE", "CombineParams", params.CombineParamsStruct],
  ["MLA_OFFSETS_DCP_MERGE", "DcpMergeParams", params.DcpMergeParamsStruct],
  ["MLA_OFFSETS_FP8W", "Fp8KvWriteParams", params.Fp8KvWriteParamsStruct],
  ["MLA_OFFSETS_MODEL1W", "Model1KvWriteParams", params.Model1KvWriteParamsStruct],
  ["MLA_OFFSETS_REF", "RefParams", params.RefParamsStruct],
  ["MLA_OFFSETS_SPARSE_REF", "SparseRefParams", params.SparseRefParamsStruct],
];
const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-layout-"));
try {
  const src = path.join(dir, "layout.cu");
  const lines = STRUCTS.map(([macro, name]) => `  printf("${name} size %d\\n", (int)sizeof(mla::${name})); ${macro}(mla::${name}, FIELD)`);
  writeFileSync(src, [
    "#include <cstdio>",
    "#include <cstddef>",
    `#include "${path.join(root, "kernels/mla/params.h")}"`,
    '#define FIELD(T, f) printf("%s %s %d\\n", #T, #f, (int)offsetof(T, f));',
    "int main() {",
    '  printf("const D_V %d\\n", mla::D_V);',
    ...lines,
    "}",
  ].join("\n"));
  const exe = path.join(dir, "layout");
  execFileSync(process.env.NVCC ?? "nvcc", ["-std=c++17", "-o", exe, src], { stdio: ["ignore", "ignore", "inherit"] });
  const out = execFileSync(exe, { encoding: "utf8" }).trim().split("\n");
  const device = new Map();
  const order = new Map();  // struct -> its fields in the macro's order: the cubin's table is positional
  for (const line of out) {
    const m = /^(?:mla::)?(\w+) (\w+) (-?\d+)$/.exec(line);
    if (!m) continue;
    device.set(`${m[1]}.${m[2]}`, Number(m[3]));
    if (m[2] !== "size") order.set(m[1], [...(order.get(m[1]) ?? []), m[2]]);
  }
  const problems = [];
  if (device.get("const.D_V") !== D_V) problems.push(`D_V: ${device.get("const.D_V")} in params.h, ${D_V} in shape.ts`);
  for (const [, name, mirror] of STRUCTS) {
    const size = device.get(`${name}.size`);
    if (size !== mirror.size) problems.push(`${name}: sizeof ${size} in params.h, ${mirror.size} in params.ts`);
    for (const [field, off] of Object.entries(mirror.offsets)) {
      if (field.startsWith("pad")) continue;
      const d = device.get(`${name}.${field}`);
      if (d === undefined) problems.push(`${name}.${field}: in params.ts but not in params.h's ${name} offsets list`);
      else if (d !== off) problems.push(`${name}.${field}: offset ${d} in params.h, ${off} in params.ts`);
    }
    // The loader compares the table entry by entry with the mirror's fields in declaration order.
    const listed = (order.get(name) ?? []).join(", "), declared = Object.keys(mirror.offsets).filter((f) => !f.startsWith("pad")).join(", ");
    if (listed !== declared) problems.push(`${name}: the offsets macro lists [${listed}], params.ts declares [${declared}] (same order needed)`);
    for (const key of device.keys()) {
      const [s, f] = key.split(".");
      if (s === name && f !== "size" && !(f in mirror.offsets)) problems.push(`${name}.${f}: in params.h but not in params.ts`);
    }
  }
  if (problems.length > 0) {
    console.error(`checkParamsLayout: params.h and src/mla/contract/params.ts disagree:\n  ${problems.join("\n  ")}`);
    process.exit(1);
  }
  console.log(`checkParamsLayout: ${STRUCTS.length} structs (${device.size - STRUCTS.length - 1} fields) and D_V agree between params.h and params.ts/shape.ts`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
