import { after, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { collectInfo } from "../../../src/cli/commands/info.js";
import { config } from "../../../src/config.js";
import { NoGpuError } from "../../../src/errors/NoGpuError.js";
import { flashMlaWithKvcache } from "../../../src/mla/flashMlaWithKvcache.js";
import { quantizeKvCacheFp8, writeKvCacheFp8 } from "../../../src/mla/kvCache/writeKvCacheFp8.js";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { mlaDecodeReferenceGpu } from "../../../src/mla/reference/mlaDecodeReferenceGpu.js";
import { getMlaMetadata, MlaSchedMeta, type MlaSchedConfig } from "../../../src/mla/sched/MlaSchedMeta.js";
import { Device } from "../../../src/runtime/Device.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import type { DType } from "../../../src/runtime/dtype.js";
import { hopperSupport } from "../../../src/runtime/hopperSupport.js";
import { Module } from "../../../src/runtime/Module.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { makeDenseCase } from "../../../src/testing/denseCase.js";
import { type FlashMlaWithKvcacheArgs } from "../../../src/mla/args.js";

// How the package fails when what it needs is missing: no driver, a damaged kernel build, a GPU that
// is not a Hopper. Each must give one clear error naming the cause and the remedy, and leave the
// process usable (the CPU reference still works). The driver loader and the kernel loader memoise
// what they find for the life of a process, so those cases run in child processes: this file re-runs
// itself with FLASHMLA_TEST_CHILD set, and only registers tests when it is not a child.

const NO_DRIVER = "/nonexistent/flashmla-reliability/libcuda.so.1";
const NO_GPU_MESSAGE = `${NO_DRIVER} not found: no NVIDIA driver on this machine; set FLASHMLA_LIBCUDA=/path/to/libcuda.so.1 if it is elsewhere; the CPU reference (mlaDecodeReference) works without a GPU`;
const REMEDY = "run npm run build:kernels";

/** A "CUDA" tensor over a DeviceBuffer-shaped object: passes validation, never touched. */
function fakeCuda(shape: readonly number[], dtype: DType): Tensor {
  const buffer = Object.defineProperties(Object.create(DeviceBuffer.prototype), {
    ptr: { value: 1n << 32n },
    sizeBytes: { value: 1 << 30 },
    deviceOrdinal: { value: 0 },
  }) as DeviceBuffer;
  return Tensor.fromDeviceBuffer(buffer, shape, dtype);
}

/** A tiny seeded case, the same in every process. */
function smallCase() {
  return makeDenseCase({ seed: 2024, b: 2, s_q: 2, h_q: 4, h_kv: 2, seqlens: [70, 5], causal: true, dtype: "bf16", extraBlocks: 1 });
}

/** sha256 of the reference's out bits, outF32 and lse of `smallCase()`. */
function referenceDigest(): string {
  const r = mlaDecodeReference(smallCase());
  const h = createHash("sha256");
  for (const a of [r.out.host!, r.outF32, r.lse.host!]) h.update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  return h.digest("hex");
}

/** "Name: message" of what `fn` throws, or "returned". */
function outcome(fn: () => unknown): string {
  try {
    fn();
    return "returned";
  } catch (e) {
    return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
}

/** Runs this file as a child in `mode` with extra environment, and returns its JSON answer. */
function runChild<T>(mode: string, env: Record<string, string>): T {
  // Without the runner's NODE_TEST_CONTEXT the child is a plain script whose stdout is only its answer.
  const { NODE_TEST_CONTEXT: _runner, ...inherited } = process.env;
  const stdout = execFileSync(process.execPath, [fileURLToPath(import.meta.url)], {
    env: { ...inherited, FLASHMLA_TEST_CHILD: mode, ...env },
    encoding: "utf8",
  });
  return JSON.parse(stdout) as T;
}

/** What a process without libcuda sees, call by call, in the order a user would make them. */
interface NoDriverReport {
  /** Bad calls on fake GPU tensors: each must be an ArgumentError, raised before any driver call. */
  badCalls: Record<string, string>;
  noGpuErrors: Record<string, { isNoGpuError: boolean; message: string }>;
  sameErrorObjectTwice: boolean;
  referenceBefore: string;
  referenceAfter: string;
  tensorAfter: number[];
}

function noDriverChild(): NoDriverReport {
  const referenceBefore = referenceDigest();
  const dense: FlashMlaWithKvcacheArgs = {
    q: fakeCuda([1, 1, 64, 576], "bf16"),
    kCache: fakeCuda([1, 64, 1, 576], "bf16"),
    blockTable: fakeCuda([1, 1], "i32"),
    cacheSeqlens: fakeCuda([1], "i32"),
    headDimV: 512,
    schedMeta: getMlaMetadata(),
  };
  const calls: Record<string, () => unknown> = {
    "Device.get": () => Device.get(),
    "Tensor.toDevice": () => Tensor.toDevice(Tensor.zerosHost([4], "f32")),
    flashMlaWithKvcache: () => flashMlaWithKvcache(dense),
    "flashMlaWithKvcache again": () => flashMlaWithKvcache(dense),
    writeKvCacheFp8: () => writeKvCacheFp8({ kv: fakeCuda([2, 576], "bf16"), slotMapping: fakeCuda([2], "i32"), kCache: fakeCuda([1, 64, 1, 656], "u8") }),
    quantizeKvCacheFp8: () => quantizeKvCacheFp8(fakeCuda([2, 576], "bf16")),
    mlaDecodeReferenceGpu: () => mlaDecodeReferenceGpu({ ...dense, schedMeta: undefined }),
  };
  const filledFor = (config: Partial<MlaSchedConfig>) => {
    return MlaSchedMeta.withConfig({ b: 1, s_q: 1, h_q: 64, h_kv: 1, page_block_size: 64, causal: false, is_fp8_kvcache: false, topk: null, ...config });
  };
  const disposed = getMlaMetadata();
  disposed.dispose();
  const badCalls: Record<string, string> = {
    "kCache dtype": outcome(() => flashMlaWithKvcache({ ...dense, kCache: fakeCuda([1, 64, 1, 576], "fp16") })),
    "host blockTable": outcome(() => flashMlaWithKvcache({ ...dense, blockTable: Tensor.zerosHost([1, 1], "i32") })),
    "disposed metadata": outcome(() => flashMlaWithKvcache({ ...dense, schedMeta: disposed })),
    "metadata for h_q = 128": outcome(() => flashMlaWithKvcache({ ...dense, schedMeta: filledFor({ h_q: 128 }) })),
    "writer slotMapping for 3 tokens": outcome(() => writeKvCacheFp8({ kv: fakeCuda([2, 576], "bf16"), slotMapping: fakeCuda([3], "i32"), kCache: fakeCuda([1, 64, 1, 656], "u8") })),
    "reference GPU with out": outcome(() => mlaDecodeReferenceGpu({ ...dense, schedMeta: undefined, out: fakeCuda([1, 1, 64, 512], "bf16") })),
  };
  const noGpuErrors: NoDriverReport["noGpuErrors"] = {};
  const thrown: unknown[] = [];
  for (const [name, call] of Object.entries(calls)) {
    try {
      call();
      noGpuErrors[name] = { isNoGpuError: false, message: "returned" };
    } catch (e) {
      thrown.push(e);
      noGpuErrors[name] = { isNoGpuError: e instanceof NoGpuError, message: e instanceof Error ? e.message : String(e) };
    }
  }
  return {
    badCalls,
    noGpuErrors,
    // The loader keeps its verdict: the same error object every time, no retry cost per call.
    sameErrorObjectTwice: thrown[2] !== undefined && thrown[2] === thrown[3],
    referenceBefore,
    referenceAfter: referenceDigest(),
    // Host tensors and the CPU quantizer keep working too.
    tensorAfter: Array.from(quantizeKvCacheFp8(Tensor.zerosHost([1, 576], "bf16")).host!.subarray(512, 516)),
  };
}

/** A copy of the built kernels with one cubin damaged, for FLASHMLA_KERNEL_DIR. */
const tempDirs: string[] = [];
function damagedKernelDir(damage: (file: string) => void, victim = "combine"): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-damaged-kernels-"));
  tempDirs.push(dir);
  // Files only: the test-only cubins' folder (testing/) is not part of what is damaged.
  for (const e of readdirSync(config.kernelDir, { withFileTypes: true })) if (e.isFile()) copyFileSync(path.join(config.kernelDir, e.name), path.join(dir, e.name));
  damage(path.join(dir, `${victim}.cubin`));
  return dir;
}

function flipOneByte(file: string): void {
  const bytes = readFileSync(file);
  bytes[bytes.length >> 1] ^= 0x01;
  writeFileSync(file, bytes);
}

interface CorruptKernelsReport {
  damaged: string;
  intact: string;
  info: { ok: boolean; problem: string | undefined };
  referenceAfter: string;
}

function corruptKernelsChild(): CorruptKernelsReport {
  const report = collectInfo();
  return {
    damaged: outcome(() => Module.load("combine")),
    intact: outcome(() => Module.load("sched_meta")),
    info: { ok: report.kernels.ok, problem: report.kernels.problem },
    referenceAfter: referenceDigest(),
  };
}

const child = process.env.FLASHMLA_TEST_CHILD;
if (child === "no-driver") {
  process.stdout.write(JSON.stringify(noDriverChild()));
} else if (child === "corrupt-kernels") {
  process.stdout.write(JSON.stringify(corruptKernelsChild()));
} else if (child === undefined) {
  const builtKernels = existsSync(path.join(config.kernelDir, "manifest.json"));
  const needsBuild = builtKernels ? false : `no kernel build in ${config.kernelDir} (npm run build:kernels)`;
  after(() => {
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });

  test("without libcuda bad arguments are still ArgumentErrors, every GPU entry point throws one NoGpuError naming the cause and remedy, and the CPU reference keeps working", () => {
    const r = runChild<NoDriverReport>("no-driver", { FLASHMLA_LIBCUDA: NO_DRIVER });
    // Argument errors come first, whatever the machine has (and no kernel ever sees a fake pointer).
    const F = "ArgumentError: flashMlaWithKvcache(): argument";
    assert.deepEqual(r.badCalls, {
      "kCache dtype": `${F} 'kCache': expected dtype bf16, got fp16`,
      "host blockTable": `${F} 'blockTable': expected a CUDA tensor, got a cpu tensor (copy it with Tensor.toDevice)`,
      "disposed metadata": `${F} 'schedMeta': expected live scheduler metadata, got a disposed MlaSchedMeta`,
      "metadata for h_q = 128": `${F} 'schedMeta': expected metadata for h_q = 128 (it was filled for that batch; call getMlaMetadata() again for a new shape), got h_q = 64`,
      "writer slotMapping for 3 tokens": "ArgumentError: writeKvCacheFp8(): argument 'slotMapping': expected num_tokens = 2 (shape [2]), got 3 (shape [3])",
      "reference GPU with out": "ArgumentError: mlaDecodeReferenceGpu(): argument 'out': expected undefined (the fp32 reference returns new f32 out and lse), got a value",
    });
    for (const [call, { isNoGpuError, message }] of Object.entries(r.noGpuErrors)) {
      assert.ok(isNoGpuError, `${call}: expected a NoGpuError, got ${message}`);
      assert.equal(message, NO_GPU_MESSAGE, call);
    }
    assert.equal(Object.keys(r.noGpuErrors).length, 7);
    assert.ok(r.sameErrorObjectTwice, "a second call gets the memoised error");
    assert.equal(r.referenceBefore, r.referenceAfter, "the CPU reference gives the same bits after the GPU failures");
    assert.equal(r.referenceAfter, referenceDigest(), "and the same bits as a process with whatever driver this one has");
    assert.deepEqual(r.tensorAfter, Array.from(quantizeKvCacheFp8(Tensor.zerosHost([1, 576], "bf16")).host!.subarray(512, 516)), "the CPU quantizer still works");
  });

  test("a cubin with one flipped byte is refused by name with the rebuild remedy; intact cubins still load", { skip: needsBuild }, () => {
    const dir = damagedKernelDir(flipOneByte);
    const file = path.join(dir, "combine.cubin");
    const r = runChild<CorruptKernelsReport>("corrupt-kernels", { FLASHMLA_KERNEL_DIR: dir, FLASHMLA_LIBCUDA: NO_DRIVER });
    assert.match(r.damaged, new RegExp(`^Error: ${escape(file)} does not match manifest\\.json \\(sha256 [0-9a-f]{12}…, expected [0-9a-f]{12}…\\): the cubin is stale or damaged; ${REMEDY}$`));
    // The intact module passes the hash check and only then needs the (absent) driver.
    assert.equal(r.intact, `NoGpuError: ${NO_GPU_MESSAGE}`);
    assert.equal(r.info.ok, false);
    assert.match(r.info.problem ?? "", new RegExp(`^${escape(file)} does not match manifest\\.json .*; ${REMEDY}$`));
    assert.equal(r.referenceAfter, referenceDigest());
  });

  test("a truncated, a missing or an unlisted cubin and a damaged manifest each name the file and the remedy", { skip: needsBuild }, () => {
    const truncated = damagedKernelDir((f) => truncateSync(f, 4096));
    assert.throws(() => Module.load("combine", { kernelDir: truncated }), new RegExp(`^Error: ${escape(path.join(truncated, "combine.cubin"))} does not match manifest\\.json .*; ${REMEDY}$`));
    const missing = damagedKernelDir((f) => rmSync(f), "sched_meta");
    assert.throws(() => Module.load("sched_meta", { kernelDir: missing }), new RegExp(`^Error: ${escape(path.join(missing, "sched_meta.cubin"))} not found although manifest\\.json lists it; ${REMEDY}$`));
    const unlisted = damagedKernelDir(() => {});
    const manifest = JSON.parse(readFileSync(path.join(unlisted, "manifest.json"), "utf8")) as { kernels: Record<string, unknown> };
    delete manifest.kernels.combine;
    writeFileSync(path.join(unlisted, "manifest.json"), JSON.stringify(manifest));
    assert.throws(() => Module.load("combine", { kernelDir: unlisted }), new RegExp(`manifest\\.json lists no kernel module "combine" \\(it has: .*sched_meta.*\\); ${REMEDY}$`));
    const garbled = damagedKernelDir(() => {});
    writeFileSync(path.join(garbled, "manifest.json"), "{\"kernels\": {");
    assert.throws(() => Module.load("combine", { kernelDir: garbled }), new RegExp(`^Error: ${escape(path.join(garbled, "manifest.json"))} is not valid JSON .*; ${REMEDY}$`));
  });

  test("hopperSupport() accepts only compute capability 9.0 and names the GPU, its capability and the target", () => {
    assert.deepEqual(hopperSupport({ name: "NVIDIA H200", computeCapability: { major: 9, minor: 0 } }), { ok: true });
    assert.deepEqual(hopperSupport({ name: "NVIDIA A100-SXM4-80GB", computeCapability: { major: 8, minor: 0 } }), {
      ok: false,
      reason: "NVIDIA A100-SXM4-80GB has compute capability 8.0 (an older architecture); the flashmla-ts kernels are built for sm_90a and run only on compute capability 9.0 GPUs (H100, H200, H800, GH200)",
    });
    const cases: Array<[string, number, number, string]> = [
      ["Tesla V100-SXM2-32GB", 7, 0, "an older architecture"],
      ["NVIDIA L40S", 8, 9, "an older architecture"],
      ["NVIDIA B200", 10, 0, "a newer architecture, which cannot run sm_90a code"],
      ["NVIDIA GeForce RTX 5090", 12, 0, "a newer architecture, which cannot run sm_90a code"],
    ];
    for (const [name, major, minor, when] of cases) {
      const v = hopperSupport({ name, computeCapability: { major, minor } });
      assert.equal(v.ok, false, name);
      if (!v.ok) assert.equal(v.reason, `${name} has compute capability ${major}.${minor} (${when}); the flashmla-ts kernels are built for sm_90a and run only on compute capability 9.0 GPUs (H100, H200, H800, GH200)`);
    }
  });

  test("on a non-Hopper GPU the kernel loader's error says what the GPU is and that the CPU reference works", () => {
    // loadKernel() throws exactly this before it reads a cubin (the driver's own refusal,
    // CUDA_ERROR_NO_BINARY_FOR_GPU, names neither the cause nor a way out).
    const v = hopperSupport({ name: "NVIDIA A100-SXM4-80GB", computeCapability: { major: 8, minor: 0 } });
    assert.ok(!v.ok);
    const e = new NoGpuError(v.reason);
    assert.equal(e.name, "NoGpuError");
    assert.match(e.message, /^NVIDIA A100-SXM4-80GB has compute capability 8\.0 .*compute capability 9\.0 GPUs \(H100, H200, H800, GH200\); the CPU reference \(mlaDecodeReference\) works without a GPU$/);
  });
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
