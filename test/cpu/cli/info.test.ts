import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { formatInfo, type InfoReport } from "../../../src/cli/commands/info.js";

// dist/test/cpu/cli -> dist/src/cli/cli.js
const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src/cli/cli.js");
const NO_DRIVER = "/nonexistent/flashmla-test/libcuda.so.1";

function flashmla(args: string[], env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cli, ...args], { env: { ...process.env, FLASHMLA_LIBCUDA: NO_DRIVER, ...env }, encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("flashmla info without a driver says no GPU was found, why, and that the CPU reference works; exit 0", () => {
  const r = flashmla(["info"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^GPU: +none found: ${NO_DRIVER.replace(/[./]/g, "\\$&")} not found: no NVIDIA driver on this machine`, "m"));
  assert.match(r.stdout, /^Hopper kernels can run: no: no GPU was found$/m);
  assert.match(r.stdout, /^CPU reference: +available \(mlaDecodeReference, no GPU needed\)$/m);
  assert.match(r.stdout, /^flashmla-ts: +\d+\.\d+\.\d+ \(Node v\d+/m);
});

test("flashmla info --json prints a parseable report", () => {
  const r = flashmla(["info", "--json"], { FLASHMLA_KERNEL_DIR: "/nonexistent/flashmla-kernels" });
  assert.equal(r.status, 0, r.stderr);
  const report = JSON.parse(r.stdout) as InfoReport;
  assert.equal(report.driver.available, false);
  assert.equal(report.deviceCount, 0);
  assert.equal(report.gpu.available, false);
  assert.equal(report.hopperKernels.canRun, false);
  assert.equal(report.cpuReference.available, true);
  assert.equal(report.libcudaPath, NO_DRIVER);
  assert.equal(report.kernels.ok, false);
  assert.match(report.kernels.problem!, /manifest\.json not found: .*run npm run build:kernels/);
});

test("flashmla exits 2 on an unknown option, an unknown command or a bad value", () => {
  const option = flashmla(["info", "--bogus"]);
  assert.equal(option.status, 2);
  assert.match(option.stderr, /unknown option '--bogus'/);
  const command = flashmla(["nosuchcommand"]);
  assert.equal(command.status, 2);
  assert.match(command.stderr, /unknown command/);
  const value = flashmla(["info", "--device", "first"]);
  assert.equal(value.status, 2);
  assert.match(value.stderr, /expected a non-negative integer/);
});

test("flashmla --help lists info and exits 0", () => {
  const r = flashmla(["--help"]);
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^ +info /m);
});

test("formatInfo() shows every property of a GPU and the verdict", () => {
  const report: InfoReport = {
    packageVersion: "0.1.0",
    nodeVersion: "v20.20.2",
    libcudaPath: "libcuda.so.1",
    driver: { available: true, cudaVersion: "13.0", versionCode: 13000 },
    deviceCount: 1,
    gpu: {
      available: true,
      ordinal: 0,
      name: "NVIDIA H200",
      computeCapability: "9.0",
      smCount: 132,
      clockRateKHz: 1_980_000,
      memoryClockRateKHz: 3_201_000,
      memoryBusWidth: 6144,
      peakMemoryBandwidthGBs: 4916.736,
      totalMemBytes: 150_754_820_096,
      freeMemBytes: 150_000_000_000,
      l2CacheBytes: 62_914_560,
      maxSharedMemoryPerBlockOptin: 232_448,
      clusterLaunch: true,
      isHopper: true,
    },
    kernels: { dir: "/pkg/dist/kernels", present: true, ok: true, modules: ["combine", "sched_meta"] },
    hopperKernels: { canRun: true, reason: "NVIDIA H200 is sm_90 and 2 verified cubins are in /pkg/dist/kernels" },
    gpuStatus: {
      ok: true,
      device: { ordinal: 0, name: "NVIDIA H200", computeCapability: "9.0", smCount: 132, memoryBytes: 150_754_820_096, driverVersion: "13.0" },
      kernels: { dir: "/pkg/dist/kernels", present: true, modules: ["combine", "sched_meta"] },
    },
    cpuReference: { available: true, entryPoint: "mlaDecodeReference" },
  };
  const text = formatInfo(report);
  for (const line of [
    /^driver: +CUDA 13\.0 \(libcuda\.so\.1\), 1 device\(s\)$/m,
    /^GPU 0: +NVIDIA H200$/m,
    /^compute capability: +9\.0$/m,
    /^SMs: +132$/m,
    /^SM clock: +1980 MHz$/m,
    /^memory: +140\.4 GiB total, 139\.7 GiB free$/m,
    /^memory bus: +3201 MHz × 6144 bit ≈ 4\.92 TB\/s peak$/m,
    /^L2 cache: +60\.0 MiB$/m,
    /^opt-in shared memory: +232448 bytes per block \(227 KiB\)$/m,
    /^cluster launch: +yes$/m,
    /^kernels: +combine, sched_meta \(\/pkg\/dist\/kernels\)$/m,
    /^Hopper kernels can run: yes: NVIDIA H200 is sm_90/m,
  ]) {
    assert.match(text, line);
  }
});
