import { ArgumentError, describeValue, formatGot } from "../errors/ArgumentError.js";
import { CudaError } from "../errors/CudaError.js";
import { NoGpuError } from "../errors/NoGpuError.js";
import { check } from "../driver/check.js";
import { CUdeviceAttribute } from "../driver/cudaEnums.js";
import type { DriverApi } from "../driver/DriverApi.js";
import { driverStatus, loadDriver } from "../driver/loadDriver.js";

const devices = new Map<number, Device>();
/** Ordinal whose primary context is current on this thread (Node runs driver calls on one thread). */
let currentOrdinal: number | undefined;

/**
 * One CUDA device with its primary context. `Device.get()` retains the context once per process
 * and makes it current; the properties are read once, when the device is first opened.
 */
export class Device {
  /** Device name, e.g. "NVIDIA H200". */
  readonly name: string;
  readonly computeCapability: { readonly major: number; readonly minor: number };
  /** Streaming multiprocessors. */
  readonly smCount: number;
  /** Peak SM clock in kHz. */
  readonly clockRateKHz: number;
  /** Peak memory clock in kHz. */
  readonly memoryClockRateKHz: number;
  /** Global memory bus width in bits. */
  readonly memoryBusWidth: number;
  readonly l2CacheBytes: number;
  /** Shared memory one block may use after opting in (cuFuncSetAttribute). */
  readonly maxSharedMemoryPerBlockOptin: number;
  /** Whether thread block clusters can be launched. */
  readonly clusterLaunch: boolean;
  readonly totalMemBytes: number;

  private constructor(
    readonly ordinal: number,
    /** The CUdevice handle. */
    readonly handle: number,
    /** The retained primary CUcontext. */
    readonly context: bigint,
  ) {
    const api = loadDriver();
    const name = new Uint8Array(256);
    check(api.cuDeviceGetName(name, name.length, handle), "cuDeviceGetName");
    const end = name.indexOf(0);
    this.name = new TextDecoder().decode(end < 0 ? name : name.subarray(0, end));
    this.computeCapability = Object.freeze({
      major: this.attribute(CUdeviceAttribute.COMPUTE_CAPABILITY_MAJOR),
      minor: this.attribute(CUdeviceAttribute.COMPUTE_CAPABILITY_MINOR),
    });
    this.smCount = this.attribute(CUdeviceAttribute.MULTIPROCESSOR_COUNT);
    this.clockRateKHz = this.attribute(CUdeviceAttribute.CLOCK_RATE);
    this.memoryClockRateKHz = this.attribute(CUdeviceAttribute.MEMORY_CLOCK_RATE);
    this.memoryBusWidth = this.attribute(CUdeviceAttribute.GLOBAL_MEMORY_BUS_WIDTH);
    this.l2CacheBytes = this.attribute(CUdeviceAttribute.L2_CACHE_SIZE);
    this.maxSharedMemoryPerBlockOptin = this.attribute(CUdeviceAttribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    this.clusterLaunch = this.attribute(CUdeviceAttribute.CLUSTER_LAUNCH) !== 0;
    const total = new BigUint64Array(1);
    check(api.cuDeviceTotalMem_v2(total, handle), "cuDeviceTotalMem_v2");
    this.totalMemBytes = Number(total[0]);
  }

  /**
   * Number of CUDA devices the driver sees: 0 without a driver (no libcuda.so.1, or one too old) and
   * when the driver finds no device, so a program can ask before it opens one. `gpuStatus()` says why.
   * @throws CudaError when the driver is there but fails (cuInit fails otherwise, cuDeviceGetCount fails):
   *   a broken installation should not read as "no GPU".
   */
  static count(): number {
    const status = driverStatus();
    if (!status.ok) {
      if (status.failure === "init-failed" && status.error.cause instanceof CudaError) throw status.error.cause;
      return 0;
    }
    const out = new Int32Array(1);
    check(status.api.cuDeviceGetCount(out), "cuDeviceGetCount");
    return out[0];
  }

  /**
   * The device `ordinal`, with its primary context retained (once per process) and made current.
   * @default ordinal 0
   * @throws NoGpuError when there is no driver or no device; ArgumentError for a bad ordinal.
   */
  static get(ordinal = 0): Device {
    checkDeviceOrdinal("Device.get", "ordinal", ordinal);
    let device = devices.get(ordinal);
    if (!device) {
      // First, so that without a driver the error is the loader's (what is missing), not count()'s 0.
      const api = loadDriver();
      const count = Device.count();
      if (count === 0) throw new NoGpuError("the NVIDIA driver found no CUDA device");
      if (ordinal >= count) {
        throw new ArgumentError("Device.get", "ordinal", `an ordinal below ${count} (the number of CUDA devices)`, String(ordinal));
      }
      const dev = new Int32Array(1);
      check(api.cuDeviceGet(dev, ordinal), "cuDeviceGet");
      const ctx = new BigUint64Array(1);
      check(api.cuDevicePrimaryCtxRetain(ctx, dev[0]), "cuDevicePrimaryCtxRetain");
      check(api.cuCtxSetCurrent(ctx[0]), "cuCtxSetCurrent");
      currentOrdinal = ordinal;
      device = new Device(ordinal, dev[0], ctx[0]);
      devices.set(ordinal, device);
    }
    device.makeCurrent();
    return device;
  }

  /** True for compute capability 9.0 (H100/H200/H800), the only target of the sm_90a kernels. */
  get isHopper(): boolean {
    return this.computeCapability.major === 9 && this.computeCapability.minor === 0;
  }

  /** Makes this device's primary context current (a no-op when it already is). */
  makeCurrent(): void {
    if (currentOrdinal === this.ordinal) return;
    check(loadDriver().cuCtxSetCurrent(this.context), "cuCtxSetCurrent");
    currentOrdinal = this.ordinal;
  }

  /** Reads any CUdevice_attribute (see cuda.h); the named properties cover the common ones. */
  attribute(attribute: number): number {
    if (!Number.isSafeInteger(attribute) || attribute < 0) {
      throw new ArgumentError("Device.attribute", "attribute", "a CUdevice_attribute (a non-negative integer, see cuda.h)", describeValue(attribute));
    }
    const out = new Int32Array(1);
    check(loadDriver().cuDeviceGetAttribute(out, attribute, this.handle), "cuDeviceGetAttribute");
    return out[0];
  }

  /** Free and total device memory in bytes, as the driver reports them now. */
  memInfo(): { free: number; total: number } {
    this.makeCurrent();
    const free = new BigUint64Array(1);
    const total = new BigUint64Array(1);
    check(loadDriver().cuMemGetInfo_v2(free, total), "cuMemGetInfo_v2");
    return { free: Number(free[0]), total: Number(total[0]) };
  }

  /** Waits until all work queued on this device has finished. */
  synchronize(): void {
    this.makeCurrent();
    check(loadDriver().cuCtxSynchronize(), "cuCtxSynchronize");
  }

  toString(): string {
    return `Device(cuda:${this.ordinal}, ${this.name}, cc ${this.computeCapability.major}.${this.computeCapability.minor})`;
  }
}

/**
 * Checks a device ordinal argument (0 for the first GPU). A Device passed where its ordinal belongs is
 * named as such, since `Stream.create(device)` is an easy slip.
 */
export function checkDeviceOrdinal(fn: string, argument: string, ordinal: unknown): number {
  if (typeof ordinal !== "number" || !Number.isSafeInteger(ordinal) || ordinal < 0) {
    const got = ordinal instanceof Device ? `${ordinal} (pass device.ordinal)` : formatGot(ordinal);
    throw new ArgumentError(fn, argument, "a non-negative integer", got);
  }
  return ordinal;
}

/**
 * Makes device `ordinal` current and returns the driver: the first step of every runtime call that
 * touches device memory or queues work.
 */
export function driverOn(ordinal: number): DriverApi {
  Device.get(ordinal);
  return loadDriver();
}
