import { Command, Option } from "commander";
import { config } from "../../config.js";
import { check } from "../../driver/check.js";
import { driverAvailable, loadDriver } from "../../driver/loadDriver.js";
import { gpuStatus, type GpuStatus, type KernelStatus } from "../../mla/gpuStatus.js";
import { Device } from "../../runtime/Device.js";
import { nonNegativeInteger, packageVersion } from "../options.js";

/** What `flashmla info` found: software, driver, the GPU, the kernels and what can run. */
export interface InfoReport {
  packageVersion: string;
  nodeVersion: string;
  /** The driver library asked for (FLASHMLA_LIBCUDA or libcuda.so.1). */
  libcudaPath: string;
  driver: { available: true; cudaVersion: string; versionCode: number } | { available: false; reason: string };
  deviceCount: number;
  /** The selected GPU, or why there is none. */
  gpu: GpuInfo | { available: false; reason: string };
  /** The kernel folder (gpuStatus's `kernels`); `ok` is `present`, kept for readers of older reports. */
  kernels: KernelStatus & { ok: boolean };
  /** Whether the sm_90a kernels can run here, and if not why not. */
  hopperKernels: { canRun: boolean; reason: string };
  /** The library's own answer (gpuStatus()): ok, or the first check that failed and what to do. */
  gpuStatus: GpuStatus;
  /** The float64 CPU reference needs nothing but Node. */
  cpuReference: { available: true; entryPoint: "mlaDecodeReference" };
}

/** Properties of one GPU, as the driver reports them. */
export interface GpuInfo {
  available: true;
  ordinal: number;
  name: string;
  computeCapability: string;
  smCount: number;
  clockRateKHz: number;
  memoryClockRateKHz: number;
  memoryBusWidth: number;
  /** 2 transfers per memory clock × bus width: the datasheet's peak, not a measurement. */
  peakMemoryBandwidthGBs: number;
  totalMemBytes: number;
  freeMemBytes: number;
  l2CacheBytes: number;
  maxSharedMemoryPerBlockOptin: number;
  clusterLaunch: boolean;
  isHopper: boolean;
}

/** Options of `collectInfo`. */
export interface CollectInfoOptions {
  /** @default config.deviceOrdinal (FLASHMLA_DEVICE) */
  deviceOrdinal?: number;
  /** @default config.kernelDir (FLASHMLA_KERNEL_DIR) */
  kernelDir?: string;
}

/**
 * Gathers the report. Never throws for a missing driver, GPU or kernel build: each becomes a
 * reason in the report. The verdict is gpuStatus()'s; the rest describes the machine.
 */
export function collectInfo(options: CollectInfoOptions = {}): InfoReport {
  const ordinal = options.deviceOrdinal ?? config.deviceOrdinal;
  const status = gpuStatus(options.deviceOrdinal, { kernelDir: options.kernelDir ?? config.kernelDir });
  const kernels = { ...status.kernels, ok: status.kernels.present };
  const base = { packageVersion: packageVersion(), nodeVersion: process.version, libcudaPath: config.libcudaPath };
  const cpuReference = { available: true, entryPoint: "mlaDecodeReference" } as const;

  const probe = driverAvailable();
  if (!probe.ok) {
    return {
      ...base,
      driver: { available: false, reason: probe.reason },
      deviceCount: 0,
      gpu: { available: false, reason: probe.reason },
      kernels,
      hopperKernels: { canRun: false, reason: "no GPU was found" },
      gpuStatus: status,
      cpuReference,
    };
  }

  const version = new Int32Array(1);
  check(loadDriver().cuDriverGetVersion(version), "cuDriverGetVersion");
  const driver = {
    available: true as const,
    versionCode: version[0],
    cudaVersion: `${Math.floor(version[0] / 1000)}.${Math.floor((version[0] % 1000) / 10)}`,
  };
  const deviceCount = Device.count();
  let gpu: InfoReport["gpu"];
  try {
    gpu = describeGpu(Device.get(ordinal));
  } catch (e) {
    gpu = { available: false, reason: e instanceof Error ? e.message : String(e) };
  }
  return { ...base, driver, deviceCount, gpu, kernels, hopperKernels: hopperVerdict(status), gpuStatus: status, cpuReference };
}

function describeGpu(device: Device): GpuInfo {
  const mem = device.memInfo();
  const cc = device.computeCapability;
  return {
    available: true,
    ordinal: device.ordinal,
    name: device.name,
    computeCapability: `${cc.major}.${cc.minor}`,
    smCount: device.smCount,
    clockRateKHz: device.clockRateKHz,
    memoryClockRateKHz: device.memoryClockRateKHz,
    memoryBusWidth: device.memoryBusWidth,
    peakMemoryBandwidthGBs: (2 * device.memoryClockRateKHz * 1e3 * (device.memoryBusWidth / 8)) / 1e9,
    totalMemBytes: device.totalMemBytes,
    freeMemBytes: mem.free,
    l2CacheBytes: device.l2CacheBytes,
    maxSharedMemoryPerBlockOptin: device.maxSharedMemoryPerBlockOptin,
    clusterLaunch: device.clusterLaunch,
    isHopper: device.isHopper,
  };
}

function hopperVerdict(status: GpuStatus): InfoReport["hopperKernels"] {
  if (!status.ok) return { canRun: false, reason: status.message };
  return { canRun: true, reason: `${status.device.name} is sm_90 and ${status.kernels.modules.length} verified cubins are in ${status.kernels.dir}` };
}

/** Renders the report for a terminal: one "label: value" line per fact. */
export function formatInfo(report: InfoReport): string {
  const rows: [string, string][] = [["flashmla-ts", `${report.packageVersion} (Node ${report.nodeVersion})`]];
  if (!report.driver.available) {
    rows.push(["GPU", `none found: ${report.driver.reason}`]);
  } else {
    rows.push(["driver", `CUDA ${report.driver.cudaVersion} (${report.libcudaPath}), ${report.deviceCount} device(s)`]);
    const g = report.gpu;
    if (!g.available) {
      rows.push(["GPU", `none usable: ${g.reason}`]);
    } else {
      rows.push(
        [`GPU ${g.ordinal}`, g.name],
        ["compute capability", g.computeCapability],
        ["SMs", String(g.smCount)],
        ["SM clock", `${(g.clockRateKHz / 1000).toFixed(0)} MHz`],
        ["memory", `${gib(g.totalMemBytes)} total, ${gib(g.freeMemBytes)} free`],
        ["memory bus", `${(g.memoryClockRateKHz / 1000).toFixed(0)} MHz × ${g.memoryBusWidth} bit ≈ ${(g.peakMemoryBandwidthGBs / 1000).toFixed(2)} TB/s peak`],
        ["L2 cache", `${(g.l2CacheBytes / 2 ** 20).toFixed(1)} MiB`],
        ["opt-in shared memory", `${g.maxSharedMemoryPerBlockOptin} bytes per block (${(g.maxSharedMemoryPerBlockOptin / 1024).toFixed(0)} KiB)`],
        ["cluster launch", g.clusterLaunch ? "yes" : "no"],
      );
    }
  }
  rows.push(["kernels", report.kernels.present ? `${report.kernels.modules.join(", ")} (${report.kernels.dir})` : `not usable: ${report.kernels.problem}`]);
  rows.push(["Hopper kernels can run", report.hopperKernels.canRun ? `yes: ${report.hopperKernels.reason}` : `no: ${report.hopperKernels.reason}`]);
  rows.push(["CPU reference", `available (${report.cpuReference.entryPoint}, no GPU needed)`]);
  const width = Math.max(...rows.map(([label]) => label.length)) + 1;
  return rows.map(([label, value]) => `${`${label}:`.padEnd(width)} ${value}`).join("\n") + "\n";
}

function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

/** Adds `info` to `program`: what this machine offers (driver, GPU, kernels) and what can run. */
export function registerInfoCommand(program: Command): Command {
  return program
    .command("info")
    .description("Show the CUDA driver, the GPU and whether the Hopper kernels can run here (exit 0 even without a GPU)")
    .addOption(new Option("--json", "print the report as JSON"))
    .addOption(new Option("--device <ordinal>", "CUDA device to describe (default FLASHMLA_DEVICE or 0)").argParser(nonNegativeInteger))
    .action((opts: { json?: boolean; device?: number }, cmd: Command) => {
      const report = collectInfo({ deviceOrdinal: opts.device });
      const text = opts.json ? JSON.stringify(report, null, 2) + "\n" : formatInfo(report);
      // Commander's output hook, so a program built in-process (tests) can capture it.
      const writeOut = cmd.configureOutput().writeOut ?? ((s: string) => void process.stdout.write(s));
      writeOut(text);
    });
}

