import { config } from "../config.js";
import { ArgumentError } from "../errors/ArgumentError.js";
import { check } from "../driver/check.js";
import { CUresult } from "../driver/cudaEnums.js";
import { driverOn } from "./Device.js";
import { DisposeOnce } from "./DisposeOnce.js";
import { Kernel } from "./Kernel.js";
import { readVerifiedCubin } from "./readVerifiedCubin.js";

export type { Kernel };

/** Options for `Module.load`. */
export interface ModuleLoadOptions {
  /** Folder holding `<name>.cubin` and `manifest.json`. @default config.kernelDir (FLASHMLA_KERNEL_DIR) */
  kernelDir?: string;
  /** @default 0 */
  deviceOrdinal?: number;
}

/** A loaded CUDA module (cuModuleLoadData): a cubin's kernels and globals on one device. */
export class Module {
  readonly #handle: bigint;
  readonly #state: DisposeOnce;
  readonly #kernels = new Map<string, Kernel>();

  private constructor(
    handle: bigint,
    /** What was loaded, for messages: the module name or a caller's label. */
    readonly label: string,
    readonly deviceOrdinal: number,
  ) {
    this.#handle = handle;
    this.#state = new DisposeOnce(
      () => `Module ${label}`,
      () => check(driverOn(deviceOrdinal).cuModuleUnload(handle), "cuModuleUnload"),
    );
  }

  /**
   * Loads `<kernelDir>/<name>.cubin` after checking it against `manifest.json` (listed, sha256
   * equal); a missing or stale file throws an Error naming it and saying "run npm run build:kernels".
   * A number for `options` is the device ordinal.
   */
  static load(name: string, options: ModuleLoadOptions | number = {}): Module {
    const opts = typeof options === "number" ? { deviceOrdinal: options } : options;
    if (typeof name !== "string" || !/^[\w.-]+$/.test(name)) {
      throw new ArgumentError("Module.load", "name", "a kernel module name (letters, digits, _ . -)", JSON.stringify(name));
    }
    const image = readVerifiedCubin(opts.kernelDir ?? config.kernelDir, name);
    return Module.fromImage(image, name, opts.deviceOrdinal ?? 0);
  }

  /** Loads a module from memory: a cubin, or PTX text ending in a NUL byte. */
  static fromImage(image: Uint8Array, label = "image", deviceOrdinal = 0): Module {
    if (!(image instanceof Uint8Array) || image.byteLength === 0) {
      throw new ArgumentError("Module.fromImage", "image", "a non-empty Uint8Array", String(image));
    }
    const out = new BigUint64Array(1);
    check(driverOn(deviceOrdinal).cuModuleLoadData(out, image), "cuModuleLoadData");
    return new Module(out[0], label, deviceOrdinal);
  }

  /** The CUmodule handle. Throws once the module is disposed. */
  get handle(): bigint {
    this.#state.assertLive("Module.handle");
    return this.#handle;
  }

  get disposed(): boolean {
    return this.#state.disposed;
  }

  /** The `extern "C" __global__` function `name` (one Kernel object per name). */
  getFunction(name: string): Kernel {
    let kernel = this.#kernels.get(name);
    if (!kernel) {
      const out = new BigUint64Array(1);
      const rc = driverOn(this.deviceOrdinal).cuModuleGetFunction(out, this.handle, name);
      if (rc === CUresult.ERROR_NOT_FOUND) {
        throw new ArgumentError(`Module(${this.label}).getFunction`, "name", `an extern "C" kernel defined in ${this.label}`, JSON.stringify(name));
      }
      check(rc, "cuModuleGetFunction");
      kernel = new Kernel(this, name, out[0]);
      this.#kernels.set(name, kernel);
    }
    return kernel;
  }

  /** Device address and size of the `__device__` / `__constant__` variable `name`. */
  getGlobal(name: string): { ptr: bigint; sizeBytes: number } {
    const ptr = new BigUint64Array(1);
    const size = new BigUint64Array(1);
    const rc = driverOn(this.deviceOrdinal).cuModuleGetGlobal_v2(ptr, size, this.handle, name);
    if (rc === CUresult.ERROR_NOT_FOUND) {
      throw new ArgumentError(`Module(${this.label}).getGlobal`, "name", `a global variable defined in ${this.label}`, JSON.stringify(name));
    }
    check(rc, "cuModuleGetGlobal_v2");
    return { ptr: ptr[0], sizeBytes: Number(size[0]) };
  }

  /**
   * Copies the bytes of the global variable `name` to the host (synchronously), e.g. a
   * `__device__ const int layout[]` table the kernel build exports for a host-side check.
   */
  readGlobal(name: string): Uint8Array {
    const { ptr, sizeBytes } = this.getGlobal(name);
    const bytes = new Uint8Array(sizeBytes);
    if (sizeBytes > 0) check(driverOn(this.deviceOrdinal).cuMemcpyDtoH_v2(bytes, ptr, sizeBytes), "cuMemcpyDtoH_v2");
    return bytes;
  }

  /** Unloads the module; its kernels can no longer be launched. Safe to call twice. */
  dispose(): void {
    this.#state.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

