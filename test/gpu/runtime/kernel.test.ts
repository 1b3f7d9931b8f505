import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { CudaError } from "../../../src/errors/CudaError.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { Graph } from "../../../src/runtime/Graph.js";
import { Module } from "../../../src/runtime/Module.js";
import { sha256Hex } from "../../../src/runtime/readVerifiedCubin.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { TensorMap } from "../../../src/runtime/TensorMap.js";
import { describeGpu } from "../../helpers/gpu.js";

// Small kernels that each exercise one launch feature. Compiled here with nvcc (the GPU hosts have
// it), so the test does not depend on the project's kernel build.
const PROBE_SOURCE = String.raw`
#include <cuda.h>
#include <cstdint>

__device__ int probe_magic[4] = {1, 2, 3, 0x7fffffff};

extern "C" __global__ void echo_args(unsigned long long* out, int i, unsigned int u, float f, unsigned long long q) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    out[0] = static_cast<unsigned long long>(static_cast<long long>(i));
    out[1] = u;
    out[2] = __float_as_uint(f);
    out[3] = q;
    out[4] = reinterpret_cast<unsigned long long>(out);
  }
}

struct BigParams {
  float* out;
  int n;
  float scale;
  float data[2000];
};

extern "C" __global__ void big_params(const __grid_constant__ BigParams p) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) p.out[i] = p.data[i] * p.scale;
}

extern "C" __global__ void cluster_ids(unsigned int* out) {
  unsigned int rank, size;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = rank;
    out[2 * blockIdx.x + 1] = size;
  }
}

extern "C" __global__ void pdl_producer(int* buf, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) buf[i] = 3 * i;
  asm volatile("griddepcontrol.launch_dependents;");
}

extern "C" __global__ void pdl_consumer(const int* buf, int* out, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = buf[i] + 1;
}

extern "C" __global__ void smem_reverse(int* out, int n) {
  extern __shared__ int s[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = i ^ 0x5a5a;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i];
}

// Loads one 32 x 16 f32 box at (x0, y0) with TMA and writes it out row-major.
extern "C" __global__ void tma_load_2d(const __grid_constant__ CUtensorMap tmap, float* out, int x0, int y0) {
  __shared__ alignas(128) float tile[16 * 32];
  __shared__ alignas(8) uint64_t bar;
  const uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
    asm volatile("fence.proxy.async.shared::cta;");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(16 * 32 * 4));
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            static_cast<uint32_t>(__cvta_generic_to_shared(tile))),
        "l"(&tmap), "r"(x0), "r"(y0), "r"(bar_addr)
        : "memory");
    uint32_t done = 0;
    while (!done) {
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done)
                   : "r"(bar_addr)
                   : "memory");
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * 32; i += blockDim.x) out[i] = tile[i];
}
`;

function findNvcc(): string | undefined {
  for (const candidate of [process.env.NVCC, "nvcc", "/usr/local/cuda/bin/nvcc"]) {
    if (!candidate) continue;
    try {
      execFileSync(candidate, ["--version"], { stdio: "ignore" });
      return candidate;
    } catch {
      // try the next one
    }
  }
  return undefined;
}

/** Builds the probe cubin into a fresh kernel folder with a manifest, as the kernel build would. */
function buildProbe(nvcc: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-probe-"));
  const src = path.join(dir, "runtime_probe.cu");
  writeFileSync(src, PROBE_SOURCE);
  const cubin = path.join(dir, "runtime_probe.cubin");
  execFileSync(nvcc, ["-O2", "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-cubin", "-o", cubin, src], { stdio: "pipe" });
  writeFileSync(path.join(dir, "manifest.json"), JSON.stringify({ kernels: { runtime_probe: { cubinSha256: sha256Hex(readFileSync(cubin)) } } }));
  return dir;
}

const nvcc = findNvcc();

describeGpu(
  "Kernel launch with a probe cubin built by nvcc",
  (device) => {
    if (!nvcc) {
      test("kernel launch tests need nvcc", { skip: "SKIPPED: nvcc not found (set NVCC=/path/to/nvcc)" }, () => {});
      return;
    }
    const kernelDir = buildProbe(nvcc);
    const mod = Module.load("runtime_probe", { kernelDir });

    test("launch() passes ptr, i32, u32, f32 and u64 arguments by value", () => {
      const k = mod.getFunction("echo_args");
      assert.equal(mod.getFunction("echo_args"), k, "one Kernel per name");
      assert.deepEqual(
        k.paramInfo()?.map((p) => p.sizeBytes),
        [8, 4, 4, 4, 8],
      );
      using out = DeviceBuffer.alloc(5 * 8);
      k.launch({ grid: 1, block: 32 }, [
        { kind: "ptr", value: out.ptr },
        { kind: "i32", value: -7 },
        { kind: "u32", value: 0xfedc_ba98 },
        { kind: "f32", value: 0.1 },
        { kind: "u64", value: 0x0123_4567_89ab_cdefn },
      ]);
      const back = new BigUint64Array(5);
      out.copyToHost(back);
      assert.equal(back[0], (1n << 64n) - 7n);
      assert.equal(back[1], 0xfedc_ba98n);
      const f = new DataView(new ArrayBuffer(4));
      f.setFloat32(0, 0.1, true);
      assert.equal(back[2], BigInt(f.getUint32(0, true)));
      assert.equal(back[3], 0x0123_4567_89ab_cdefn);
      assert.equal(back[4], out.ptr);
    });

    test("launch() checks the argument count and sizes against cuFuncGetParamInfo", () => {
      const k = mod.getFunction("echo_args");
      using out = DeviceBuffer.alloc(64);
      const args = [
        { kind: "ptr", value: out.ptr },
        { kind: "i32", value: 1 },
        { kind: "u32", value: 2 },
        { kind: "f32", value: 3 },
      ] as const;
      assert.throws(() => k.launch({ grid: 1, block: 32 }, [...args]), (e: unknown) => {
        assert.ok(e instanceof ArgumentError);
        assert.match(e.message, /^Kernel\(echo_args\)\.launch\(\): argument 'args': expected 5 arguments for kernel echo_args \(parameter sizes \[8, 4, 4, 4, 8\] bytes\), got 4$/);
        return true;
      });
      assert.throws(() => k.launch({ grid: 1, block: 32 }, [...args, { kind: "i32", value: 4 }]), /argument 'args\[4\]': expected 8 bytes for parameter 4 of kernel echo_args, got i32 of 4 bytes/);
    });

    test("launch() passes an 8 KiB __grid_constant__ struct by value", () => {
      const k = mod.getFunction("big_params");
      const size = k.paramInfo()![0].sizeBytes;
      assert.equal(size, 8 + 4 + 4 + 2000 * 4);
      const n = 2000;
      using out = DeviceBuffer.alloc(n * 4);
      const params = new Uint8Array(size);
      const v = new DataView(params.buffer);
      v.setBigUint64(0, out.ptr, true);
      v.setInt32(8, n, true);
      v.setFloat32(12, 0.5, true);
      for (let i = 0; i < n; i++) v.setFloat32(16 + 4 * i, i - 1000, true);
      k.launch({ grid: 4, block: 128 }, [{ kind: "bytes", value: params }]);
      const back = new Float32Array(n);
      out.copyToHost(back);
      for (let i = 0; i < n; i++) assert.equal(back[i], (i - 1000) * 0.5, `out[${i}]`);
    });

    test("launch() with cluster [2, 1, 1] runs blocks in clusters of two", () => {
      const k = mod.getFunction("cluster_ids");
      using out = DeviceBuffer.alloc(8 * 2 * 4);
      k.launch({ grid: 8, block: 64, cluster: [2, 1, 1] }, [{ kind: "ptr", value: out.ptr }]);
      const back = new Uint32Array(16);
      out.copyToHost(back);
      assert.deepEqual([...back], [0, 2, 1, 2, 0, 2, 1, 2, 0, 2, 1, 2, 0, 2, 1, 2]);
      k.launch({ grid: 8, block: 64 }, [{ kind: "ptr", value: out.ptr }]);
      out.copyToHost(back);
      assert.deepEqual([...back], new Array(8).fill([0, 1]).flat());
      const clusters = k.maxActiveClusters({ grid: 8, block: 64, cluster: [2, 1, 1] });
      assert.ok(clusters === undefined || clusters >= 60, `max active clusters ${clusters}`);
    });

    test("launch() with pdl: true lets a consumer wait for its producer with griddepcontrol", () => {
      const n = 1 << 20;
      using stream = Stream.create();
      using buf = DeviceBuffer.alloc(n * 4);
      using out = DeviceBuffer.alloc(n * 4);
      buf.memset32(0, 0, undefined, stream);
      for (let round = 0; round < 3; round++) {
        mod.getFunction("pdl_producer").launch({ grid: 264, block: 256, stream }, [{ kind: "ptr", value: buf.ptr }, { kind: "i32", value: n }]);
        mod.getFunction("pdl_consumer").launch({ grid: 264, block: 256, stream, pdl: true }, [
          { kind: "ptr", value: buf.ptr },
          { kind: "ptr", value: out.ptr },
          { kind: "i32", value: n },
        ]);
      }
      stream.synchronize();
      const back = new Int32Array(n);
      out.copyToHost(back);
      for (let i = 0; i < n; i += 4099) assert.equal(back[i], 3 * i + 1, `out[${i}]`);
      assert.equal(back[n - 1], 3 * (n - 1) + 1);
    });

    test("launch() above 48 KiB of dynamic shared memory needs maxDynamicSharedMemory", () => {
      const fresh = Module.load("runtime_probe", { kernelDir });
      try {
        const k = fresh.getFunction("smem_reverse");
        const bytes = 200 * 1024;
        const n = bytes / 4;
        using out = DeviceBuffer.alloc(bytes);
        const args = [{ kind: "ptr", value: out.ptr }, { kind: "i32", value: n }] as const;
        assert.throws(() => k.launch({ grid: 1, block: 512, sharedMemBytes: bytes }, [...args]), CudaError);
        k.maxDynamicSharedMemory = bytes;
        assert.equal(k.maxDynamicSharedMemory, bytes);
        assert.ok(bytes <= device.maxSharedMemoryPerBlockOptin);
        k.launch({ grid: 1, block: 512, sharedMemBytes: bytes }, [...args]);
        const back = new Int32Array(n);
        out.copyToHost(back);
        for (let i = 0; i < n; i += 97) assert.equal(back[i], (n - 1 - i) ^ 0x5a5a, `out[${i}]`);
        const attrs = k.attributes();
        assert.ok(attrs.numRegs > 0 && attrs.maxThreadsPerBlock >= 512, JSON.stringify(attrs));
        assert.equal(attrs.binaryVersion, 90);
        assert.equal(attrs.maxDynamicSharedSizeBytes, bytes);
      } finally {
        fresh.dispose();
      }
    });

    test("TensorMap.encodeTiled() builds a map a TMA load reads correctly, zero-filling out of bounds", () => {
      const rows = 64;
      const cols = 100;
      const host = new Float32Array(rows * cols).map((_, i) => Math.floor(i / cols) * 1000 + (i % cols));
      using matrix = DeviceBuffer.alloc(host.byteLength);
      matrix.copyFromHost(host);
      const tmap = TensorMap.encodeTiled({
        dataType: "f32",
        globalAddress: matrix.ptr,
        globalDim: [cols, rows],
        globalStrides: [cols * 4],
        boxDim: [32, 16],
      });
      assert.equal(tmap.byteLength, 128);
      assert.ok(tmap.some((b) => b !== 0));
      const k = mod.getFunction("tma_load_2d");
      assert.deepEqual(k.paramInfo()?.map((p) => p.sizeBytes), [128, 8, 4, 4]);
      using out = DeviceBuffer.alloc(16 * 32 * 4);
      const tile = new Float32Array(16 * 32);
      for (const [x0, y0] of [[40, 10], [80, 50]]) {
        k.launch({ grid: 1, block: 128 }, [
          { kind: "bytes", value: tmap },
          { kind: "ptr", value: out.ptr },
          { kind: "i32", value: x0 },
          { kind: "i32", value: y0 },
        ]);
        out.copyToHost(tile);
        for (let r = 0; r < 16; r++) {
          for (let c = 0; c < 32; c++) {
            const inside = y0 + r < rows && x0 + c < cols;
            assert.equal(tile[r * 32 + c], inside ? (y0 + r) * 1000 + x0 + c : 0, `tile at (${x0}, ${y0}) [${r}][${c}]`);
          }
        }
      }
    });

    test("TensorMap.encodeTiled() keeps the maps it encoded: equal bytes in a fresh array, and bad options still throw", () => {
      using matrix = DeviceBuffer.alloc(64 * 128 * 4);
      const opts = { dataType: "f32" as const, globalAddress: matrix.ptr, globalDim: [128, 64], globalStrides: [512], boxDim: [32, 16] };
      const first = TensorMap.encodeTiled(opts);
      const again = TensorMap.encodeTiled({ ...opts, globalDim: [...opts.globalDim] });
      assert.notEqual(again, first, "each call returns its own array");
      assert.deepEqual(again, first);
      // Spelled differently (explicit element strides, bigint extents), so encoded by the driver again: the same bytes.
      assert.deepEqual(TensorMap.encodeTiled({ ...opts, globalDim: [128n, 64n], elementStrides: [1, 1] }), first);
      again.fill(0);
      assert.deepEqual(TensorMap.encodeTiled(opts), first, "a returned array does not alias the kept map");
      // Another address is another map.
      assert.notDeepEqual(TensorMap.encodeTiled({ ...opts, globalAddress: matrix.ptr + 512n }), first);
      // Options that print like kept ones but break a rule are checked, not served from what was kept.
      assert.throws(() => TensorMap.encodeTiled({ ...opts, globalDim: ["128", 64] as unknown as number[] }), ArgumentError);
      assert.throws(() => TensorMap.encodeTiled({ ...opts, deviceOrdinal: "0" as unknown as number }), ArgumentError);
      assert.throws(() => TensorMap.encodeTiled({ ...opts, boxDim: [32.5, 16] }), ArgumentError);
    });

    test("a graph captures a kernel launch with its arguments as they were", () => {
      const k = mod.getFunction("echo_args");
      using stream = Stream.create();
      using out = DeviceBuffer.alloc(5 * 8);
      const args = (i: number) =>
        [
          { kind: "ptr", value: out.ptr },
          { kind: "i32", value: i },
          { kind: "u32", value: 0 },
          { kind: "f32", value: 0 },
          { kind: "u64", value: 0n },
        ] as const;
      using graph = Graph.capture(stream, () => k.launch({ grid: 1, block: 32, stream }, [...args(41)]));
      k.launch({ grid: 1, block: 32, stream }, [...args(99)]);
      graph.launch(stream);
      stream.synchronize();
      const back = new BigUint64Array(5);
      out.copyToHost(back);
      assert.equal(back[0], 41n);
    });

    test("getGlobal() and readGlobal() find a __device__ array; unknown names are ArgumentErrors", () => {
      const g = mod.getGlobal("probe_magic");
      assert.equal(g.sizeBytes, 16);
      const bytes = mod.readGlobal("probe_magic");
      assert.deepEqual([...new Int32Array(bytes.buffer, bytes.byteOffset, 4)], [1, 2, 3, 0x7fffffff]);
      assert.throws(() => mod.getGlobal("no_such_global"), ArgumentError);
      assert.throws(() => mod.getFunction("no_such_kernel"), /Module\(runtime_probe\)\.getFunction\(\): argument 'name': expected an extern "C" kernel/);
    });

    test("a disposed Module's kernels refuse to launch; dispose() twice is fine", () => {
      const m = Module.load("runtime_probe", { kernelDir });
      const k = m.getFunction("echo_args");
      m.dispose();
      m.dispose();
      assert.throws(() => k.launch({ grid: 1, block: 32 }, []), /already disposed/);
    });
  },
  { needsKernels: false },
);

describeGpu(
  "the project's bench_fill cubin",
  () => {
    test("Module.load() verifies and loads bench_fill, and fill_normal_half is deterministic per seed", (t) => {
      const mod = Module.load("bench_fill");
      try {
        const k = mod.getFunction("fill_normal_half");
        const n = 1 << 16;
        using a = DeviceBuffer.alloc(n * 2);
        using b = DeviceBuffer.alloc(n * 2);
        const fill = (buf: DeviceBuffer, seed: bigint) =>
          k.launch({ grid: 64, block: 256 }, [
            { kind: "ptr", value: buf.ptr },
            { kind: "u64", value: BigInt(n) },
            { kind: "u64", value: seed },
            { kind: "f32", value: 1 },
            { kind: "f32", value: 100 },
            { kind: "i32", value: 0 },
          ]);
        fill(a, 1234n);
        fill(b, 1234n);
        const x = new Uint16Array(n);
        const y = new Uint16Array(n);
        a.copyToHost(x);
        b.copyToHost(y);
        assert.deepEqual(x, y, "same seed, same data");
        fill(b, 1235n);
        b.copyToHost(y);
        assert.notDeepEqual(x, y, "another seed, other data");
        const f = new Float32Array(new Uint32Array(x).map((bits) => bits << 16).buffer);
        const mean = f.reduce((s, v) => s + v, 0) / n;
        const sd = Math.sqrt(f.reduce((s, v) => s + (v - mean) ** 2, 0) / n);
        t.diagnostic(`mean ${mean.toFixed(4)}, sd ${sd.toFixed(4)}`);
        assert.ok(Math.abs(mean) < 0.05 && Math.abs(sd - 1) < 0.05, `mean ${mean}, sd ${sd}`);
      } finally {
        mod.dispose();
      }
    });
  },
  { needsKernels: true },
);

