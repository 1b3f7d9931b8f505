import { ArgumentError } from "../errors/ArgumentError.js";
import type { Stream } from "./Stream.js";

/** Three extents x, y, z. */
export type Dim3 = readonly [number, number, number];

/** How to launch a kernel (see `Kernel.launch`). */
export interface LaunchConfig {
  /** Blocks in the grid; a number means [n, 1, 1]. */
  grid: Dim3 | number;
  /** Threads per block; a number means [n, 1, 1]. */
  block: Dim3 | number;
  /** Dynamic shared memory per block; above 48 KiB set `kernel.maxDynamicSharedMemory` first. @default 0 */
  sharedMemBytes?: number;
  /** @default the legacy default stream */
  stream?: Stream;
  /** Thread block cluster shape; each grid extent must be a multiple of it. */
  cluster?: Dim3;
  /**
   * Programmatic dependent launch: let this grid start while the previous kernel on the stream
   * finishes; the kernel must wait with griddepcontrol.wait (cudaGridDependencySynchronize).
   * @default false
   */
  pdl?: boolean;
}

/** A checked LaunchConfig with every extent spelled out. */
export interface NormalizedLaunchConfig {
  grid: Dim3;
  block: Dim3;
  sharedMemBytes: number;
  cluster: Dim3 | undefined;
  pdl: boolean;
}

// Hardware limits of sm_90 (CUDA programming guide, "Technical Specifications").
const MAX_GRID: Dim3 = [0x7fffffff, 65535, 65535];
const MAX_BLOCK: Dim3 = [1024, 1024, 64];
const MAX_THREADS_PER_BLOCK = 1024;

/**
 * Checks a launch configuration before it reaches the driver, so a mistake names the kernel and
 * the field instead of surfacing as CUDA_ERROR_INVALID_VALUE.
 */
export function normalizeLaunchConfig(kernelName: string, cfg: LaunchConfig): NormalizedLaunchConfig {
  const fn = `Kernel(${kernelName}).launch`;
  if (cfg === null || typeof cfg !== "object") throw new ArgumentError(fn, "cfg", "a LaunchConfig object", String(cfg));
  const grid = dim3(fn, "grid", cfg.grid, MAX_GRID);
  const block = dim3(fn, "block", cfg.block, MAX_BLOCK);
  const threads = block[0] * block[1] * block[2];
  if (threads > MAX_THREADS_PER_BLOCK) {
    throw new ArgumentError(fn, "block", `at most ${MAX_THREADS_PER_BLOCK} threads per block`, `[${block.join(", ")}] = ${threads}`);
  }
  const sharedMemBytes = cfg.sharedMemBytes ?? 0;
  if (!Number.isInteger(sharedMemBytes) || sharedMemBytes < 0 || sharedMemBytes > 0xffffffff) {
    throw new ArgumentError(fn, "sharedMemBytes", "a non-negative integer", String(sharedMemBytes));
  }
  let cluster: Dim3 | undefined;
  if (cfg.cluster !== undefined) {
    cluster = dim3(fn, "cluster", cfg.cluster, MAX_BLOCK);
    for (let i = 0; i < 3; i++) {
      if (grid[i] % cluster[i] !== 0) {
        throw new ArgumentError(fn, "cluster", `extents dividing the grid [${grid.join(", ")}]`, `[${cluster.join(", ")}]`);
      }
    }
  }
  const pdl = cfg.pdl ?? false;
  if (typeof pdl !== "boolean") throw new ArgumentError(fn, "pdl", "a boolean", String(pdl));
  return { grid, block, sharedMemBytes, cluster, pdl };
}

function dim3(fn: string, argument: string, value: Dim3 | number, max: Dim3): Dim3 {
  const d: number[] = typeof value === "number" ? [value, 1, 1] : Array.isArray(value) ? [...value] : [];
  const ok = d.length === 3 && d.every((n, i) => Number.isInteger(n) && n >= 1 && n <= max[i]);
  if (!ok) {
    throw new ArgumentError(fn, argument, `a positive integer or [x, y, z] of positive integers at most [${max.join(", ")}]`, JSON.stringify(value));
  }
  return [d[0], d[1], d[2]];
}
