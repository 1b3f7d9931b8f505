import path from "node:path";
import { config } from "../../config.js";
import { NoGpuError } from "../../errors/NoGpuError.js";
import { Device } from "../../runtime/Device.js";
import { hopperSupport } from "../../runtime/hopperSupport.js";
import type { Kernel } from "../../runtime/Kernel.js";
import { Module } from "../../runtime/Module.js";
import type { Dim3 } from "../../runtime/normalizeLaunchConfig.js";
import { readKernelManifest } from "../../runtime/readVerifiedCubin.js";
import type { Stream } from "../../runtime/Stream.js";
import type { CStruct } from "./CStruct.js";
import {
  CombineParamsStruct,
  DcpMergeParamsStruct,
  DenseParamsStruct,
  Fp8KvWriteParamsStruct,
  Model1KvWriteParamsStruct,
  RefParamsStruct,
  SchedParamsStruct,
  SparseParamsStruct,
  SparseRefParamsStruct,
} from "./params.js";

/** One kernel of the library: where it lives, what it takes, and how it is launched. */
export interface KernelRow {
  /** The cubin, `<kernelDir>/<cubin>.cubin`, listed in the kernel folder's manifest.json. */
  readonly cubin: string;
  /** The `extern "C"` entry point. */
  readonly symbol: string;
  /**
   * The struct the kernel takes by value, and the name of the `{sizeof, offsetof...}` table of it that
   * the cubin exports: compared with the mirror at load, so a drift fails there, not in a launch.
   */
  readonly params?: { readonly struct: CStruct<string>; readonly table: string };
  /** Threads per CTA its launcher runs. */
  readonly threads: number;
  /** CTAs per cluster along x (1: no cluster). */
  readonly clusterX: number;
  /**
   * The main decode kernels export `mla_kernel_facts` = {dynamic smem bytes, threads, cluster x}: the
   * loader requires threads and cluster x to equal this row's and launches with the cubin's smem size.
   */
  readonly facts: boolean;
  /** A TEST_KERNEL_REGISTRY row: built from kernels/testing/, loaded from config.testKernelDir. */
  readonly testOnly?: true;
}

/** What every main decode kernel's cubin exports: its params layout and its launch facts. */
const MAIN_LAYOUT = "mla_params_layout";
const MAIN_FACTS = "mla_kernel_facts";
const dense = { struct: DenseParamsStruct, table: MAIN_LAYOUT } as const;
const sparse = { struct: SparseParamsStruct, table: MAIN_LAYOUT } as const;

/**
 * Every kernel the library launches, by name. A new variant is a new row (and, for a main kernel, the
 * choice that picks it in dense/chooseDenseKernel.ts or sparse/chooseSparseKernel.ts).
 */
export const KERNEL_REGISTRY = Object.freeze({
  // Dense: two warpgroups sharing one online softmax; "pipe" queues each warpgroup's next Q·Kᵀ behind
  // its last P·V (FlashMLA's rotated loop), "fast" does not.
  dense_fast_bf16: { cubin: "dense_fast_bf16", symbol: "mla_dense_fast_bf16_sm90", params: dense, threads: 256, clusterX: 1, facts: true },
  dense_fast_fp16: { cubin: "dense_fast_fp16", symbol: "mla_dense_fast_fp16_sm90", params: dense, threads: 256, clusterX: 1, facts: true },
  dense_pipe_bf16: { cubin: "dense_pipe_bf16", symbol: "mla_dense_pipe_bf16_sm90", params: dense, threads: 256, clusterX: 1, facts: true },
  dense_pipe_fp16: { cubin: "dense_pipe_fp16", symbol: "mla_dense_pipe_fp16_sm90", params: dense, threads: 256, clusterX: 1, facts: true },
  // The same two forms at DeepSeek-V4's d_qk 512 (Q·Kᵀ over eight 64-dim tiles, V the whole row).
  dense_fast_bf16_d512: { cubin: "dense_fast_bf16_d512", symbol: "mla_dense_fast_bf16_d512_sm90", params: dense, threads: 256, clusterX: 1, facts: true },
  dense_fast_fp16_d512: { cubin: "dense_fast_fp16_d512", symbol: "mla_dense_fast_fp16_d512_sm90", params: dense, threads: 256, clusterX: 1, facts: true },
  dense_pipe_bf16_d512: { cubin: "dense_pipe_bf16_d512", symbol: "mla_dense_pipe_bf16_d512_sm90", params: dense, threads: 256, clusterX: 1, facts: true },
  dense_pipe_fp16_d512: { cubin: "dense_pipe_fp16_d512", symbol: "mla_dense_pipe_fp16_d512_sm90", params: dense, threads: 256, clusterX: 1, facts: true },
  // Sparse FP8: two producer warpgroups gather and dequantize, two consumer warpgroups compute.
  sparse_m64_bf16: { cubin: "sparse_m64_bf16", symbol: "mla_sparse_m64_bf16_sm90", params: sparse, threads: 512, clusterX: 1, facts: true },
  // The two 64-head CTAs of a query token share each token's dequantization across a cluster.
  sparse_h128x_bf16: { cubin: "sparse_h128x_bf16", symbol: "mla_sparse_h128x_bf16_sm90", params: sparse, threads: 512, clusterX: 2, facts: true },
  sparse_h16x_bf16: { cubin: "sparse_h16x_bf16", symbol: "mla_sparse_h16x_bf16_sm90", params: sparse, threads: 512, clusterX: 1, facts: true },
  // The same plans over DeepSeek-V4's MODEL1 cache (d_qk 512, V the whole row).
  sparse_m64_model1: { cubin: "sparse_m64_model1", symbol: "mla_sparse_m64_model1_sm90", params: sparse, threads: 512, clusterX: 1, facts: true },
  sparse_h128x_model1: { cubin: "sparse_h128x_model1", symbol: "mla_sparse_h128x_model1_sm90", params: sparse, threads: 512, clusterX: 2, facts: true },
  sparse_h16x_model1: { cubin: "sparse_h16x_model1", symbol: "mla_sparse_h16x_model1_sm90", params: sparse, threads: 512, clusterX: 1, facts: true },
  // Each of them with a second cache and index list in the same softmax (extraKCache).
  sparse_m64_bf16_extra: { cubin: "sparse_m64_bf16_extra", symbol: "mla_sparse_m64_bf16_extra_sm90", params: sparse, threads: 512, clusterX: 1, facts: true },
  sparse_h128x_bf16_extra: { cubin: "sparse_h128x_bf16_extra", symbol: "mla_sparse_h128x_bf16_extra_sm90", params: sparse, threads: 512, clusterX: 2, facts: true },
  sparse_h16x_bf16_extra: { cubin: "sparse_h16x_bf16_extra", symbol: "mla_sparse_h16x_bf16_extra_sm90", params: sparse, threads: 512, clusterX: 1, facts: true },
  sparse_m64_model1_extra: { cubin: "sparse_m64_model1_extra", symbol: "mla_sparse_m64_model1_extra_sm90", params: sparse, threads: 512, clusterX: 1, facts: true },
  sparse_h128x_model1_extra: { cubin: "sparse_h128x_model1_extra", symbol: "mla_sparse_h128x_model1_extra_sm90", params: sparse, threads: 512, clusterX: 2, facts: true },
  sparse_h16x_model1_extra: { cubin: "sparse_h16x_model1_extra", symbol: "mla_sparse_h16x_model1_extra_sm90", params: sparse, threads: 512, clusterX: 1, facts: true },
  sched_meta: { cubin: "sched_meta", symbol: "mla_sched_meta", params: { struct: SchedParamsStruct, table: "sched_params_layout" }, threads: 32, clusterX: 1, facts: false },
  combine_bf16: { cubin: "combine", symbol: "mla_combine_bf16", params: { struct: CombineParamsStruct, table: "combine_params_layout" }, threads: 512, clusterX: 1, facts: false },
  combine_fp16: { cubin: "combine", symbol: "mla_combine_fp16", params: { struct: CombineParamsStruct, table: "combine_params_layout" }, threads: 512, clusterX: 1, facts: false },
  // Decode context parallelism: the ranks' partial outputs merged by their log-sum-exp (src/dcp).
  dcp_merge_bf16: { cubin: "dcp_merge", symbol: "mla_dcp_merge_bf16", params: { struct: DcpMergeParamsStruct, table: "dcp_merge_params_layout" }, threads: 256, clusterX: 1, facts: false },
  dcp_merge_fp16: { cubin: "dcp_merge", symbol: "mla_dcp_merge_fp16", params: { struct: DcpMergeParamsStruct, table: "dcp_merge_params_layout" }, threads: 256, clusterX: 1, facts: false },
  fp8_kv_write: { cubin: "fp8_kv_writer", symbol: "fp8_kv_write_v32", params: { struct: Fp8KvWriteParamsStruct, table: "fp8_kv_write_params_layout" }, threads: 256, clusterX: 1, facts: false },
  fp8_kv_write_model1: { cubin: "fp8_kv_writer_model1", symbol: "fp8_kv_write_model1", params: { struct: Model1KvWriteParamsStruct, table: "model1_kv_write_params_layout" }, threads: 256, clusterX: 1, facts: false },
  dense_reference_fp32: { cubin: "reference_fp32", symbol: "mla_dense_reference_fp32", params: { struct: RefParamsStruct, table: "ref_params_layout" }, threads: 256, clusterX: 1, facts: false },
  sparse_reference_fp32: { cubin: "reference_fp32", symbol: "mla_sparse_reference_fp32", params: { struct: SparseRefParamsStruct, table: "sparse_ref_params_layout" }, threads: 256, clusterX: 1, facts: false },
} satisfies Record<string, KernelRow>);

/**
 * Kernels only the tests launch, built from kernels/testing/ into config.testKernelDir and not shipped:
 * apart from KERNEL_REGISTRY, so that "every cubin of the registry" means what a user's install needs.
 */
export const TEST_KERNEL_REGISTRY = Object.freeze({
  // The sparse kernels' e4m3 → bf16 conversion alone, for an exhaustive GPU test (plain arguments).
  dequant_selftest: { cubin: "dequant_selftest", symbol: "mla_sparse_dequant_selftest", threads: 128, clusterX: 1, facts: false, testOnly: true },
} satisfies Record<string, KernelRow>);

export type KernelName = keyof typeof KERNEL_REGISTRY | keyof typeof TEST_KERNEL_REGISTRY;

/** A registry row loaded on one device, its params layout and facts checked. */
export interface LoadedKernel {
  readonly name: KernelName;
  readonly row: KernelRow;
  readonly kernel: Kernel;
  /** Dynamic shared memory per CTA: the cubin's fact for a main kernel, else 0. */
  readonly smemBytes: number;
}

/**
 * Enqueues one launch of `k` on `grid` with its packed params struct, its row's CTA size and cluster,
 * and its cubin's shared-memory size. `pdl`: programmatic dependent launch after the previous kernel.
 */
export function launchKernel(k: LoadedKernel, grid: Dim3 | number, params: Uint8Array, opts: { stream?: Stream; pdl?: boolean } = {}): void {
  k.kernel.launch(
    {
      grid,
      block: k.row.threads,
      sharedMemBytes: k.smemBytes,
      stream: opts.stream,
      ...(k.row.clusterX > 1 ? { cluster: [k.row.clusterX, 1, 1] as const } : {}),
      ...(opts.pdl === true ? { pdl: true } : {}),
    },
    [{ kind: "bytes", value: params }],
  );
}

interface DeviceKernels {
  modules: Map<string, Module>;
  kernels: Map<KernelName, LoadedKernel>;
}

const devices = new Map<number, DeviceKernels>();

/**
 * The kernel `name` on device `deviceOrdinal`, loaded on first use (its module once per device) from
 * config.kernelDir (FLASHMLA_KERNEL_DIR), with its params layout and launch facts checked.
 * @throws NoGpuError without a driver or GPU, or when the GPU is not a Hopper (compute capability 9.0),
 *   before any cubin is read; Error naming the file and the remedy when the manifest lacks a cubin of
 *   the registry or a cubin disagrees with its row.
 */
export function loadKernel(deviceOrdinal: number, name: KernelName): LoadedKernel {
  const dev = devices.get(deviceOrdinal) ?? openDevice(deviceOrdinal);
  const hit = dev.kernels.get(name);
  if (hit !== undefined) return hit;
  const row: KernelRow = name in KERNEL_REGISTRY ? KERNEL_REGISTRY[name as keyof typeof KERNEL_REGISTRY] : TEST_KERNEL_REGISTRY[name as keyof typeof TEST_KERNEL_REGISTRY];
  let mod = dev.modules.get(row.cubin);
  if (mod === undefined) {
    mod = Module.load(row.cubin, { deviceOrdinal, kernelDir: row.testOnly ? config.testKernelDir : config.kernelDir });
    dev.modules.set(row.cubin, mod);
  }
  if (row.params !== undefined) row.params.struct.checkLayout(readInt32Global(mod, row.params.table));
  const kernel = mod.getFunction(row.symbol);
  let smemBytes = 0;
  if (row.facts) {
    smemBytes = checkFacts(name, row, readInt32Global(mod, MAIN_FACTS));
    kernel.maxDynamicSharedMemory = smemBytes;
  }
  const loaded: LoadedKernel = { name, row, kernel, smemBytes };
  dev.kernels.set(name, loaded);
  return loaded;
}

/**
 * First use of a device: the Hopper check (on another GPU the driver's refusal of the cubin would not say
 * what to do), then the manifest must list every cubin of the registry, so a partial build fails here
 * with the list of what is missing rather than later in the middle of a decode step.
 */
function openDevice(deviceOrdinal: number): DeviceKernels {
  const support = hopperSupport(Device.get(deviceOrdinal));
  if (!support.ok) throw new NoGpuError(support.reason);
  const listed = new Set(readKernelManifest(config.kernelDir).map((e) => e.name));
  const missing = [...new Set(Object.values(KERNEL_REGISTRY).map((r: KernelRow) => r.cubin))].filter((c) => !listed.has(c));
  if (missing.length > 0) {
    throw new Error(`${path.join(config.kernelDir, "manifest.json")} lists no ${missing.join(", ")} (the kernel registry needs them); run npm run build:kernels`);
  }
  const dev: DeviceKernels = { modules: new Map(), kernels: new Map() };
  devices.set(deviceOrdinal, dev);
  return dev;
}

/** Checks a main kernel's exported facts against its row; returns its dynamic shared-memory size. */
export function checkFacts(name: string, row: Pick<KernelRow, "cubin" | "threads" | "clusterX">, facts: Int32Array): number {
  const where = `${row.cubin}.cubin (registry row ${name})`;
  if (facts.length < 3) throw new Error(`${where}: ${MAIN_FACTS} has ${facts.length} entries, expected 3 {dynamic smem bytes, threads, cluster x}; rebuild with npm run build:kernels`);
  const [smemBytes, threads, clusterX] = facts;
  if (threads !== row.threads || clusterX !== row.clusterX) {
    throw new Error(
      `${where}: the cubin was built for ${threads} threads and clusters of ${clusterX}, the registry launches ${row.threads} threads and clusters of ${row.clusterX} ` +
        `(kernels/ and src/mla/contract/kernelRegistry.ts must change together; rebuild with npm run build:kernels)`,
    );
  }
  if (!(smemBytes > 0)) throw new Error(`${where}: ${MAIN_FACTS} gives ${smemBytes} bytes of dynamic shared memory, expected > 0; rebuild with npm run build:kernels`);
  return smemBytes;
}

function readInt32Global(mod: Module, name: string): Int32Array {
  const bytes = mod.readGlobal(name);
  return new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}
