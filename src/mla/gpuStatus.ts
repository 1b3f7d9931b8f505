import path from "node:path";
import { config } from "../config.js";
import { check } from "../driver/check.js";
import { CUdeviceAttribute } from "../driver/cudaEnums.js";
import type { DriverApi } from "../driver/DriverApi.js";
import { driverStatus } from "../driver/loadDriver.js";
import { ArgumentError, describeValue, optionsObject } from "../errors/ArgumentError.js";
import { checkDeviceOrdinal } from "../runtime/Device.js";
import { hopperSupport } from "../runtime/hopperSupport.js";
import { readKernelManifest, readVerifiedCubin } from "../runtime/readVerifiedCubin.js";
import { KERNEL_REGISTRY } from "./contract/kernelRegistry.js";

const FN = "gpuStatus";
const CPU_FALLBACK = "the CPU reference (mlaDecodeReference) works without a GPU";

/** One GPU as `gpuStatus` found it (read from the driver without creating a context). */
export interface GpuDeviceSummary {
  ordinal: number;
  /** e.g. "NVIDIA H200" */
  name: string;
  /** "major.minor", e.g. "9.0" */
  computeCapability: string;
  smCount: number;
  /** Total device memory. */
  memoryBytes: number;
  /** The CUDA version the driver supports (cuDriverGetVersion), e.g. "12.8"; not the NVIDIA driver's release number. */
  driverVersion: string;
}

/** The compiled kernels in a kernel folder. */
export interface KernelStatus {
  /** The folder looked in: FLASHMLA_KERNEL_DIR, else the package's dist/kernels. */
  dir: string;
  /** manifest.json is there and lists every cubin the library launches, each matching its sha256. */
  present: boolean;
  /** The modules whose cubin matches the manifest, in the manifest's order. */
  modules: string[];
  /** Why not present: the file and the remedy. */
  problem?: string;
}

/**
 * What {@link gpuStatus} found. When not ok, `reason` is the first check that failed and `message`
 * says what is missing and what to do; `kernels` is in every answer, so a machine without a GPU can
 * still show that the kernels are installed.
 */
export type GpuStatus =
  | { ok: true; device: GpuDeviceSummary; kernels: KernelStatus & { present: true } }
  | { ok: false; reason: "no-driver"; message: string; kernels: KernelStatus }
  | { ok: false; reason: "no-device"; message: string; deviceCount: number; driverVersion?: string; kernels: KernelStatus }
  | { ok: false; reason: "not-hopper"; message: string; device: GpuDeviceSummary; kernels: KernelStatus }
  | { ok: false; reason: "no-kernels"; message: string; device: GpuDeviceSummary; kernels: KernelStatus & { present: false } };

/** Options of {@link gpuStatus}. */
export interface GpuStatusOptions {
  /** @default config.kernelDir (FLASHMLA_KERNEL_DIR, else the package's dist/kernels) */
  kernelDir?: string;
}

/**
 * Whether the GPU path (flashMlaWithKvcache, writeKvCacheFp8) can run here on device `deviceOrdinal`,
 * and if not why, without throwing for what the machine lacks. The checks run in this order and the
 * first failure is the `reason`: the driver (libcuda.so.1 loads and initialises), the device (it
 * exists), its compute capability (9.0: the kernels are sm_90a), the kernels (manifest.json and every
 * cubin the library launches, hash-checked). No CUDA context is created.
 *
 * @default deviceOrdinal config.deviceOrdinal (FLASHMLA_DEVICE, else 0)
 * @throws ArgumentError for an ordinal that is not a non-negative integer, or bad options.
 * @example
 * const status = gpuStatus();
 * if (!status.ok) console.warn(`GPU path unavailable (${status.reason}): ${status.message}`);
 */
export function gpuStatus(deviceOrdinal?: number, options?: GpuStatusOptions): GpuStatus {
  if (deviceOrdinal !== undefined) checkDeviceOrdinal(FN, "deviceOrdinal", deviceOrdinal);
  const { kernelDir = config.kernelDir } = optionsObject(FN, "options", options);
  if (typeof kernelDir !== "string" || kernelDir === "") throw new ArgumentError(FN, "options.kernelDir", "a folder path", describeValue(kernelDir));
  const kernels = kernelStatus(kernelDir);

  const driver = driverStatus();
  if (!driver.ok) {
    if (driver.failure === "no-device") {
      return { ok: false, reason: "no-device", message: `${driver.error.reason}; check nvidia-smi and CUDA_VISIBLE_DEVICES; ${CPU_FALLBACK}`, deviceCount: 0, kernels };
    }
    return {
      ok: false,
      reason: "no-driver",
      message: `${driver.error.reason}; the GPU path needs the NVIDIA driver for CUDA 12.8 or newer (libcuda.so.1) and a Hopper GPU; ${CPU_FALLBACK}`,
      kernels,
    };
  }
  const api = driver.api;
  let driverVersion: string;
  let deviceCount: number;
  try {
    driverVersion = cudaVersionOf(api);
    const count = new Int32Array(1);
    check(api.cuDeviceGetCount(count), "cuDeviceGetCount");
    deviceCount = count[0];
  } catch (e) {
    return { ok: false, reason: "no-driver", message: `the NVIDIA driver loaded but does not answer: ${messageOf(e)}; ${CPU_FALLBACK}`, kernels };
  }
  const ordinal = deviceOrdinal ?? config.deviceOrdinal;
  // The default comes from the environment, not from the caller: a bad value there is an answer, not a throw.
  if (!Number.isSafeInteger(ordinal) || ordinal < 0) {
    return { ok: false, reason: "no-device", message: `FLASHMLA_DEVICE does not name a device ordinal (it reads as ${ordinal}); set it to 0 or another device's ordinal, or unset it`, deviceCount, driverVersion, kernels };
  }
  if (ordinal >= deviceCount) {
    const seen = deviceCount === 0 ? "the driver sees no CUDA device" : `the driver sees ${deviceCount} CUDA device(s), ordinals 0 to ${deviceCount - 1}`;
    return { ok: false, reason: "no-device", message: `no CUDA device ${ordinal}: ${seen}; pass another ordinal or set FLASHMLA_DEVICE; ${CPU_FALLBACK}`, deviceCount, driverVersion, kernels };
  }
  let device: GpuDeviceSummary;
  try {
    device = describeDevice(api, ordinal, driverVersion);
  } catch (e) {
    return { ok: false, reason: "no-device", message: `CUDA device ${ordinal} could not be queried: ${messageOf(e)}; ${CPU_FALLBACK}`, deviceCount, driverVersion, kernels };
  }
  const [major, minor] = device.computeCapability.split(".").map(Number);
  const support = hopperSupport({ name: device.name, computeCapability: { major, minor } });
  if (!support.ok) return { ok: false, reason: "not-hopper", message: `${support.reason}; ${CPU_FALLBACK}`, device, kernels };
  if (!kernels.present) return { ok: false, reason: "no-kernels", message: kernels.problem ?? `no kernels in ${kernels.dir}`, device, kernels: { ...kernels, present: false } };
  return { ok: true, device, kernels: { ...kernels, present: true } };
}

/**
 * The kernel folder's state: `present` when manifest.json lists every cubin of the kernel registry and
 * each matches its sha256 (what the first decode call would otherwise find out). Other modules the
 * manifest lists (the benchmark's) are verified for `modules` but do not decide `present`. Never throws.
 */
export function kernelStatus(dir: string): KernelStatus {
  let listed: string[];
  try {
    listed = readKernelManifest(dir).map((e) => e.name);
  } catch (e) {
    return { dir, present: false, modules: [], problem: messageOf(e) };
  }
  const required = new Set(Object.values(KERNEL_REGISTRY).map((row) => row.cubin));
  const modules: string[] = [];
  let problem: string | undefined;
  for (const name of listed) {
    try {
      // Hashing every cubin costs a few milliseconds and catches a half-finished rebuild.
      readVerifiedCubin(dir, name);
      modules.push(name);
    } catch (e) {
      if (required.has(name)) problem ??= messageOf(e);
    }
  }
  const missing = [...required].filter((name) => !listed.includes(name));
  if (missing.length > 0) {
    problem ??= `${path.join(dir, "manifest.json")} lists no ${missing.join(", ")} (the library launches them); run npm run build:kernels`;
  }
  return problem === undefined ? { dir, present: true, modules } : { dir, present: false, modules, problem };
}

/** "major.minor" of the CUDA version the driver supports, from cuDriverGetVersion's 1000·major + 10·minor. */
function cudaVersionOf(api: DriverApi): string {
  const version = new Int32Array(1);
  check(api.cuDriverGetVersion(version), "cuDriverGetVersion");
  return `${Math.floor(version[0] / 1000)}.${Math.floor((version[0] % 1000) / 10)}`;
}

function describeDevice(api: DriverApi, ordinal: number, driverVersion: string): GpuDeviceSummary {
  const dev = new Int32Array(1);
  check(api.cuDeviceGet(dev, ordinal), "cuDeviceGet");
  const attribute = (a: number): number => {
    const out = new Int32Array(1);
    check(api.cuDeviceGetAttribute(out, a, dev[0]), "cuDeviceGetAttribute");
    return out[0];
  };
  const nameBytes = new Uint8Array(256);
  check(api.cuDeviceGetName(nameBytes, nameBytes.length, dev[0]), "cuDeviceGetName");
  const end = nameBytes.indexOf(0);
  const total = new BigUint64Array(1);
  check(api.cuDeviceTotalMem_v2(total, dev[0]), "cuDeviceTotalMem_v2");
  return {
    ordinal,
    name: new TextDecoder().decode(end < 0 ? nameBytes : nameBytes.subarray(0, end)),
    computeCapability: `${attribute(CUdeviceAttribute.COMPUTE_CAPABILITY_MAJOR)}.${attribute(CUdeviceAttribute.COMPUTE_CAPABILITY_MINOR)}`,
    smCount: attribute(CUdeviceAttribute.MULTIPROCESSOR_COUNT),
    memoryBytes: Number(total[0]),
    driverVersion,
  };
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
