import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as nccl from "../../../src/nccl/index.js";

test("flashmla-ts/nccl exports the NCCL binding", () => {
  assert.deepEqual(Object.keys(nccl).sort(), [
    "NcclComm",
    "NcclDataType",
    "NcclError",
    "NcclUnavailableError",
    "ncclAvailable",
    "ncclDataTypeOf",
    "ncclGroup",
    "ncclUniqueId",
    "ncclVersion",
  ]);
});

test("importing flashmla-ts/nccl loads nothing and leaves the environment alone", () => {
  // dist/test/cpu/nccl -> dist/src/nccl/index.js
  const index = pathToFileURL(path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src/nccl/index.js")).href;
  const env = { ...process.env };
  delete env.NCCL_NVLS_ENABLE;
  const script = `await import(${JSON.stringify(index)}); process.stdout.write(String(process.env.NCCL_NVLS_ENABLE));`;
  assert.equal(execFileSync(process.execPath, ["--input-type=module", "-e", script], { env, encoding: "utf8" }), "undefined");
});
