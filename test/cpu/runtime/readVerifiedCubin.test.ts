import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { Module } from "../../../src/runtime/Module.js";
import { readKernelManifest, readVerifiedCubin, sha256Hex } from "../../../src/runtime/readVerifiedCubin.js";

const cubin = new Uint8Array(256).map((_, i) => (i * 31 + 7) & 0xff);

function kernelDir(manifest: unknown, files: Record<string, Uint8Array> = { tiny: cubin }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-kernels-"));
  for (const [name, bytes] of Object.entries(files)) writeFileSync(path.join(dir, `${name}.cubin`), bytes);
  if (manifest !== undefined) writeFileSync(path.join(dir, "manifest.json"), typeof manifest === "string" ? manifest : JSON.stringify(manifest));
  return dir;
}

test("readVerifiedCubin() returns the bytes when the sha256 matches the manifest (object form)", () => {
  const dir = kernelDir({ arch: "sm_90a", kernels: { tiny: { cubinSha256: sha256Hex(cubin), functions: {} } } });
  assert.deepEqual(new Uint8Array(readVerifiedCubin(dir, "tiny")), cubin);
  assert.deepEqual(readKernelManifest(dir).map((e) => e.name), ["tiny"]);
});

test("readVerifiedCubin() accepts the array form of the manifest and upper-case hex", () => {
  const dir = kernelDir({ kernels: [{ name: "tiny", cubinSha256: sha256Hex(cubin).toUpperCase() }] });
  assert.equal(readVerifiedCubin(dir, "tiny").byteLength, 256);
});

test("readVerifiedCubin() rejects a cubin whose sha256 differs, naming the file and the remedy", () => {
  const dir = kernelDir({ kernels: { tiny: { cubinSha256: "0".repeat(64) } } });
  assert.throws(() => readVerifiedCubin(dir, "tiny"), (e: unknown) => {
    assert.ok(e instanceof Error);
    assert.ok(e.message.startsWith(path.join(dir, "tiny.cubin")), e.message);
    assert.match(e.message, /does not match manifest\.json .*stale or damaged; run npm run build:kernels$/);
    return true;
  });
});

test("readVerifiedCubin() explains a missing manifest, entry or cubin", () => {
  assert.throws(() => readVerifiedCubin(kernelDir(undefined), "tiny"), /manifest\.json not found: the CUDA kernels are not built; run npm run build:kernels$/);
  const listed = kernelDir({ kernels: { tiny: { cubinSha256: sha256Hex(cubin) }, other: { cubinSha256: "a".repeat(64) } } });
  assert.throws(() => readVerifiedCubin(listed, "combine"), /lists no kernel module "combine" \(it has: tiny, other\); run npm run build:kernels$/);
  assert.throws(() => readVerifiedCubin(listed, "other"), /other\.cubin not found although manifest\.json lists it; run npm run build:kernels$/);
  assert.throws(() => readVerifiedCubin(kernelDir("{ not json"), "tiny"), /manifest\.json is not valid JSON .*run npm run build:kernels$/);
  assert.throws(() => readVerifiedCubin(kernelDir({ arch: "sm_90a" }), "tiny"), /has no "kernels" object or array/);
  assert.throws(() => readVerifiedCubin(kernelDir({ kernels: { tiny: { cubinSha256: "xyz" } } }), "tiny"), /64-hex-digit "cubinSha256"/);
});

test("Module.load() checks the cubin before it needs a driver", () => {
  const dir = kernelDir({ kernels: { tiny: { cubinSha256: "1".repeat(64) } } });
  assert.throws(() => Module.load("tiny", { kernelDir: dir }), /does not match manifest\.json/);
  assert.throws(() => Module.load("../etc/passwd", { kernelDir: dir }), ArgumentError);
});
