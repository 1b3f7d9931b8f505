import { ArgumentError } from "../errors/ArgumentError.js";
import { check } from "../driver/check.js";
import { CUfunctionAttribute, CUresult } from "../driver/cudaEnums.js";
import { encodeLaunchConfig, launchConfigSizeBytes, type LaunchAttribute } from "../driver/encodeLaunchConfig.js";
import { loadKoffi } from "../driver/loadKoffi.js";
import { driverOn } from "./Device.js";
import type { Module } from "./Module.js";
import { normalizeLaunchConfig, type LaunchConfig, type NormalizedLaunchConfig } from "./normalizeLaunchConfig.js";
import { BYTES_ARG_ALIGNMENT, kernelArgSize, packKernelArgs, type KernelArg } from "./packKernelArgs.js";

/** Compile-time facts about a kernel (cuFuncGetAttribute). */
export interface KernelAttributes {
  numRegs: number;
  /** Static shared memory per block. */
  sharedSizeBytes: number;
  /** Local memory (spills, stack) per thread. */
  localSizeBytes: number;
  /** Most threads per block this kernel can be launched with. */
  maxThreadsPerBlock: number;
  constSizeBytes: number;
  /** The current dynamic shared memory limit (see `maxDynamicSharedMemory`). */
  maxDynamicSharedSizeBytes: number;
  /** PTX and SASS versions, e.g. 90 for sm_90. */
  ptxVersion: number;
  binaryVersion: number;
}

/** Where one kernel parameter sits in the parameter buffer (cuFuncGetParamInfo). */
export interface KernelParamInfo {
  offset: number;
  sizeBytes: number;
}

/**
 * A `__global__` function of a loaded Module, launched with cuLaunchKernelEx. Obtain it with
 * `module.getFunction(name)`.
 */
export class Kernel {
  #paramInfo: KernelParamInfo[] | null | undefined;

  /** @internal Use `Module.getFunction`. */
  constructor(
    readonly module: Module,
    readonly name: string,
    private readonly functionHandle: bigint,
  ) {}

  /** The CUfunction handle. Throws once the module is disposed. */
  get handle(): bigint {
    if (this.module.disposed) {
      throw new Error(`Kernel.handle(): kernel ${this.name} belongs to Module ${this.module.label}, which was already disposed`);
    }
    return this.functionHandle;
  }

  /** The dynamic shared memory a launch may request (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). */
  get maxDynamicSharedMemory(): number {
    return this.attribute(CUfunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES);
  }

  /**
   * Opts the kernel into more dynamic shared memory than the default 48 KiB, up to the device's
   * `maxSharedMemoryPerBlockOptin` minus the kernel's static shared memory.
   */
  set maxDynamicSharedMemory(bytes: number) {
    if (!Number.isInteger(bytes) || bytes < 0) {
      throw new ArgumentError(`Kernel(${this.name}).maxDynamicSharedMemory`, "bytes", "a non-negative integer", String(bytes));
    }
    const api = driverOn(this.module.deviceOrdinal);
    check(api.cuFuncSetAttribute(this.handle, CUfunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes), "cuFuncSetAttribute");
  }

  /** Registers, shared/local/constant memory and limits of this kernel. */
  attributes(): KernelAttributes {
    const A = CUfunctionAttribute;
    return {
      numRegs: this.attribute(A.NUM_REGS),
      sharedSizeBytes: this.attribute(A.SHARED_SIZE_BYTES),
      localSizeBytes: this.attribute(A.LOCAL_SIZE_BYTES),
      maxThreadsPerBlock: this.attribute(A.MAX_THREADS_PER_BLOCK),
      constSizeBytes: this.attribute(A.CONST_SIZE_BYTES),
      maxDynamicSharedSizeBytes: this.attribute(A.MAX_DYNAMIC_SHARED_SIZE_BYTES),
      ptxVersion: this.attribute(A.PTX_VERSION),
      binaryVersion: this.attribute(A.BINARY_VERSION),
    };
  }

  /**
   * The kernel's parameters (offset and size of each), or undefined when the driver predates
   * cuFuncGetParamInfo (CUDA 12.4). Read once and kept.
   */
  paramInfo(): KernelParamInfo[] | undefined {
    if (this.#paramInfo === undefined) {
      const api = driverOn(this.module.deviceOrdinal);
      const getParamInfo = api.cuFuncGetParamInfo;
      if (!getParamInfo) {
        this.#paramInfo = null;
      } else {
        const params: KernelParamInfo[] = [];
        const offset = new BigUint64Array(1);
        const size = new BigUint64Array(1);
        let rc: number;
        while ((rc = getParamInfo(this.handle, params.length, offset, size)) === CUresult.SUCCESS) {
          params.push({ offset: Number(offset[0]), sizeBytes: Number(size[0]) });
        }
        // CUDA_ERROR_INVALID_VALUE marks the first index past the last parameter; any other answer
        // means the driver cannot describe this function, so launches go unchecked.
        this.#paramInfo = rc === CUresult.ERROR_INVALID_VALUE ? params : null;
      }
    }
    return this.#paramInfo ?? undefined;
  }

  /**
   * Queues the kernel on `cfg.stream` with cuLaunchKernelEx. Arguments are copied by the driver
   * during the call, so they (and the host objects behind them) may change as soon as it returns.
   * When the driver can list the kernel's parameters, their count and sizes are checked first.
   *
   * @example
   * kernel.launch({ grid: [b, 1, 1], block: 256, stream }, [
   *   { kind: "ptr", value: out.ptr }, { kind: "i32", value: n }, { kind: "f32", value: scale },
   * ]);
   */
  launch(cfg: LaunchConfig, args: readonly KernelArg[]): void {
    const launch = normalizeLaunchConfig(this.name, cfg);
    const packed = packKernelArgs(args, `Kernel(${this.name}).launch`);
    this.checkArgsAgainstParams(args);
    const api = driverOn(this.module.deviceOrdinal);
    const stream = cfg.stream ? cfg.stream.handle : 0n;

    const n = args.length;
    const pointersAt = align(packed.storage.byteLength, 8);
    const configAt = pointersAt + 8 * n;
    const attributes = launchAttributes(launch);
    const total = configAt + launchConfigSizeBytes(attributes.length);
    const block = scratch(total);
    block.bytes.set(packed.storage, 0);
    const view = new DataView(block.bytes.buffer, block.bytes.byteOffset, total);
    for (let i = 0; i < n; i++) view.setBigUint64(pointersAt + 8 * i, block.address + BigInt(packed.offsets[i]), true);
    encodeLaunchConfig(view, configAt, block.address + BigInt(configAt), {
      grid: launch.grid,
      block: launch.block,
      sharedMemBytes: launch.sharedMemBytes,
      stream,
      attributes,
    });
    const kernelParams = n > 0 ? block.address + BigInt(pointersAt) : 0n;
    check(api.cuLaunchKernelEx(block.address + BigInt(configAt), this.handle, kernelParams, 0n), "cuLaunchKernelEx");
  }

  /**
   * How many clusters of `cfg.cluster` can be co-resident (cuOccupancyMaxActiveClusters), or
   * undefined when the driver lacks the call.
   */
  maxActiveClusters(cfg: LaunchConfig): number | undefined {
    const launch = normalizeLaunchConfig(this.name, cfg);
    const api = driverOn(this.module.deviceOrdinal);
    if (!api.cuOccupancyMaxActiveClusters) return undefined;
    const attributes = launchAttributes(launch);
    const size = launchConfigSizeBytes(attributes.length);
    const block = scratch(size);
    const view = new DataView(block.bytes.buffer, block.bytes.byteOffset, size);
    encodeLaunchConfig(view, 0, block.address, {
      grid: launch.grid,
      block: launch.block,
      sharedMemBytes: launch.sharedMemBytes,
      stream: cfg.stream ? cfg.stream.handle : 0n,
      attributes,
    });
    const out = new Int32Array(1);
    check(api.cuOccupancyMaxActiveClusters(out, this.handle, block.address), "cuOccupancyMaxActiveClusters");
    return out[0];
  }

  toString(): string {
    return `Kernel(${this.name} in ${this.module.label})`;
  }

  private attribute(attribute: number): number {
    const out = new Int32Array(1);
    check(driverOn(this.module.deviceOrdinal).cuFuncGetAttribute(out, attribute, this.handle), "cuFuncGetAttribute");
    return out[0];
  }

  private checkArgsAgainstParams(args: readonly KernelArg[]): void {
    const params = this.paramInfo();
    if (!params) return;
    const fn = `Kernel(${this.name}).launch`;
    if (params.length !== args.length) {
      const sizes = params.map((p) => p.sizeBytes).join(", ");
      throw new ArgumentError(fn, "args", `${params.length} arguments for kernel ${this.name} (parameter sizes [${sizes}] bytes)`, `${args.length}`);
    }
    params.forEach((p, i) => {
      const size = kernelArgSize(args[i]);
      if (size !== p.sizeBytes) {
        throw new ArgumentError(fn, `args[${i}]`, `${p.sizeBytes} bytes for parameter ${i} of kernel ${this.name}`, `${args[i].kind} of ${size} bytes`);
      }
    });
  }
}

function launchAttributes(launch: NormalizedLaunchConfig): LaunchAttribute[] {
  const attributes: LaunchAttribute[] = [];
  if (launch.cluster) attributes.push({ id: "clusterDimension", value: launch.cluster });
  if (launch.pdl) attributes.push({ id: "programmaticStreamSerialization", value: true });
  return attributes;
}

function align(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

/**
 * One native block reused by every launch: kernelParams and the launch config hold absolute
 * addresses, so they must live in memory that does not move, and launches are synchronous calls on
 * one thread, so a single block suffices. Its start is aligned to BYTES_ARG_ALIGNMENT.
 */
let scratchBlock: { ptr: bigint; capacity: number; bytes: Uint8Array } | undefined;

function scratch(size: number): { address: bigint; bytes: Uint8Array } {
  const need = size + BYTES_ARG_ALIGNMENT;
  if (!scratchBlock || scratchBlock.capacity < need) {
    const koffi = loadKoffi();
    if (scratchBlock) koffi.free(scratchBlock.ptr);
    const capacity = Math.max(need, 2 * (scratchBlock?.capacity ?? 0), 4096);
    const ptr = koffi.alloc("uint8_t", capacity) as bigint;
    scratchBlock = { ptr, capacity, bytes: new Uint8Array(koffi.view(ptr, capacity)) };
  }
  const misalignment = Number(scratchBlock.ptr % BigInt(BYTES_ARG_ALIGNMENT));
  const skip = misalignment === 0 ? 0 : BYTES_ARG_ALIGNMENT - misalignment;
  return { address: scratchBlock.ptr + BigInt(skip), bytes: scratchBlock.bytes.subarray(skip, skip + size) };
}
