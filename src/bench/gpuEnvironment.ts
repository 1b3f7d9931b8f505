import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { check } from "../driver/check.js";
import { loadDriver } from "../driver/loadDriver.js";
import type { Device } from "../runtime/Device.js";

/** The facts about a GPU that a benchmark record must carry to be comparable with another. */
export interface GpuEnvironment {
  name: string;
  ordinal: number;
  computeCapability: string;
  smCount: number;
  /** Highest SM clock the driver reports. */
  maxSmClockMhz: number;
  /** SM clock right now, from nvidia-smi, where it answers (a throttled GPU shows here). */
  smClockMhzNow?: number;
  memoryClockMhz: number;
  memoryBusWidthBits: number;
  l2CacheBytes: number;
  totalMemBytes: number;
  /** Kernel driver version, e.g. "580.159.04", or "unknown". */
  driverVersion: string;
  /** CUDA version the driver implements, e.g. "13.0". */
  cudaDriverVersion: string;
}

/** Reads the environment of `device`: counts and clocks from the driver, versions from the system. */
export function gpuEnvironment(device: Device): GpuEnvironment {
  const version = new Int32Array(1);
  check(loadDriver().cuDriverGetVersion(version), "cuDriverGetVersion");
  const smi = nvidiaSmiClocks();
  const env: GpuEnvironment = {
    name: device.name,
    ordinal: device.ordinal,
    computeCapability: `${device.computeCapability.major}.${device.computeCapability.minor}`,
    smCount: device.smCount,
    maxSmClockMhz: Math.round(device.clockRateKHz / 1000),
    memoryClockMhz: Math.round(device.memoryClockRateKHz / 1000),
    memoryBusWidthBits: device.memoryBusWidth,
    l2CacheBytes: device.l2CacheBytes,
    totalMemBytes: device.totalMemBytes,
    driverVersion: kernelDriverVersion() ?? smi?.driverVersion ?? "unknown",
    cudaDriverVersion: `${Math.floor(version[0] / 1000)}.${(version[0] % 1000) / 10}`,
  };
  if (smi?.smClockMhz !== undefined) env.smClockMhzNow = smi.smClockMhz;
  return env;
}

/** The NVIDIA kernel module's version from /proc (Linux), which is what nvidia-smi reports. */
function kernelDriverVersion(): string | undefined {
  try {
    const text = readFileSync("/proc/driver/nvidia/version", "utf8");
    return /Kernel Module(?: for [^\s]+)?\s+(\d+(?:\.\d+)+)/.exec(text)?.[1];
  } catch {
    return undefined;
  }
}

function nvidiaSmiClocks(): { driverVersion?: string; smClockMhz?: number } | undefined {
  try {
    const out = execFileSync("nvidia-smi", ["--query-gpu=driver_version,clocks.sm", "--format=csv,noheader,nounits"], {
      encoding: "utf8",
      timeout: 5000,
      stdio: ["ignore", "pipe", "ignore"],
    });
    // One line per GPU. The driver is every GPU's, but nvidia-smi's order need not be CUDA's, so a
    // clock is only taken when there is one GPU.
    const lines = out.split("\n").filter((l) => l.trim() !== "");
    const [driverVersion, clock] = (lines[0] ?? "").split(",").map((s) => s.trim());
    const smClockMhz = lines.length === 1 ? Number(clock) : NaN;
    return { driverVersion: driverVersion || undefined, smClockMhz: Number.isFinite(smClockMhz) && smClockMhz > 0 ? smClockMhz : undefined };
  } catch {
    return undefined;
  }
}
