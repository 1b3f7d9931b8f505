import { after, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { InfoReport } from "../../../src/cli/commands/info.js";
import { REGISTRY_CUBINS, writeFakeKernelDir } from "../../helpers/fakeKernelDir.js";

// flashmla info --json carries gpuStatus()'s answer and the kernel folder's state whatever the machine
// lacks: a package installed where there is no GPU must still show that its kernels are there.

// dist/test/cpu/cli -> dist/src/cli/cli.js
const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src/cli/cli.js");
const NO_DRIVER = "/nonexistent/flashmla-info/libcuda.so.1";
const tmp = mkdtempSync(path.join(os.tmpdir(), "flashmla-info-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

function infoJson(kernelDir: string): InfoReport {
  const r = spawnSync(process.execPath, [cli, "info", "--json"], { env: { ...process.env, FLASHMLA_LIBCUDA: NO_DRIVER, FLASHMLA_KERNEL_DIR: kernelDir }, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as InfoReport;
}

test("flashmla info --json without a GPU reports the kernels present, and gpuStatus no-driver", () => {
  const dir = writeFakeKernelDir(path.join(tmp, "ready"), [...REGISTRY_CUBINS, "ceilings"]);
  const report = infoJson(dir);
  assert.deepEqual(report.kernels, { dir, present: true, modules: [...REGISTRY_CUBINS, "ceilings"], ok: true });
  assert.equal(report.gpuStatus.ok, false);
  if (report.gpuStatus.ok) return;
  assert.equal(report.gpuStatus.reason, "no-driver");
  assert.match(report.gpuStatus.message, new RegExp(`^${NO_DRIVER.replace(/[./]/g, "\\$&")} not found: no NVIDIA driver on this machine;`));
  assert.deepEqual(report.gpuStatus.kernels, { dir, present: true, modules: [...REGISTRY_CUBINS, "ceilings"] });
  assert.equal(report.hopperKernels.canRun, false);
});

test("flashmla info --json names a kernel folder that lacks a registry cubin", () => {
  const dir = writeFakeKernelDir(path.join(tmp, "partial"), REGISTRY_CUBINS.filter((n) => n !== "fp8_kv_writer"));
  const report = infoJson(dir);
  assert.equal(report.kernels.present, false);
  assert.equal(report.kernels.ok, false);
  assert.equal(report.kernels.problem, `${path.join(dir, "manifest.json")} lists no fp8_kv_writer (the library launches them); run npm run build:kernels`);
});
