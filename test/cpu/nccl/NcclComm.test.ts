import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { bindings } from "../../../src/driver/bindings.js";
import type { DeviceBuffer as DeviceBufferType } from "../../../src/runtime/DeviceBuffer.js";
import type { DType } from "../../../src/runtime/dtype.js";
import type { Stream as StreamType } from "../../../src/runtime/Stream.js";
import type { Tensor as TensorType } from "../../../src/runtime/Tensor.js";

// NcclComm end to end on a machine without a GPU: a stand-in libcuda (two devices, primary contexts,
// a current context) and a stand-in libnccl that logs each call with its arguments and the device
// current when it was made. They settle, before any GPU host does, that the koffi signatures carry
// every argument (the 128-byte id by value, device pointers, counts, enums, handles, the stream), that
// each call runs on its communicator's device, and that the binding puts back a context NCCL moved.
// The sources are loaded from these paths, which this process sets before it imports them.

/** A stand-in libcuda.so.1: what Device.get() and keepCurrentContext() call; the rest returns 801. */
const FAKE_CUDA = `
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
static void *current;
int cuInit(unsigned int flags) { (void)flags; return 0; }
int cuDeviceGetCount(int *n) { *n = 2; return 0; }
int cuDeviceGet(int *d, int ordinal) { if (ordinal < 0 || ordinal > 1) return 101; *d = ordinal; return 0; }
int cuDeviceGetName(char *out, int len, int d) { snprintf(out, (size_t)len, "Stand-in GPU %d", d); return 0; }
int cuDeviceGetAttribute(int *out, int attribute, int d) { (void)d; *out = attribute == 75 ? 9 : 0; return 0; }
int cuDeviceTotalMem_v2(size_t *bytes, int d) { (void)d; *bytes = (size_t)1 << 30; return 0; }
int cuDevicePrimaryCtxRetain(void **ctx, int d) { *ctx = (void *)(uintptr_t)(0x1000 + d); return 0; }
int cuCtxSetCurrent(void *ctx) { current = ctx; return 0; }
int cuCtxGetCurrent(void **ctx) { *ctx = current; return 0; }
int cuGetErrorName(int code, const char **s) { (void)code; *s = "CUDA_ERROR_STAND_IN"; return 0; }
int cuGetErrorString(int code, const char **s) { (void)code; *s = "stand-in driver"; return 0; }
`;
const CUDA_ANSWERED = ["cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute", "cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuCtxGetCurrent", "cuGetErrorName", "cuGetErrorString"];

/**
 * A stand-in libnccl.so.2 of one rank per communicator, linked to the stand-in libcuda: the device a
 * call runs on is the current context's. Like NCCL's cudaSetDevice, init, destroy and group end leave
 * another context (0x1fff) current. 13 elements make a collective fail; fake_set_async_error sets what
 * ncclCommGetAsyncError reports.
 */
const FAKE_NCCL = `
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct { int rank, size, dev; } comm_t;
int cuCtxGetCurrent(void **ctx);
int cuCtxSetCurrent(void *ctx);
static comm_t comms[16];
static int ncomms, async_error;
static char log_[16384];
static const char *last_error = "";
static void note(const char *fmt, ...) {
  char line[512]; va_list ap; va_start(ap, fmt); vsnprintf(line, sizeof line, fmt, ap); va_end(ap);
  if (strlen(log_) + strlen(line) + 2 < sizeof log_) { strcat(log_, line); strcat(log_, "\\n"); }
}
static int device(void) { void *ctx = 0; cuCtxGetCurrent(&ctx); return ctx ? (int)((uintptr_t)ctx - 0x1000) : -1; }
static void wander(void) { cuCtxSetCurrent((void *)(uintptr_t)0x1fff); }
static void *comm(int rank, int size, int dev) { comm_t *c = &comms[ncomms++]; c->rank = rank; c->size = size; c->dev = dev; return c; }
static int fail(int code, const char *why) { last_error = why; return code; }
static unsigned long long ull(const void *p) { return (unsigned long long)(uintptr_t)p; }
#define RANK(c) (((comm_t *)(c))->rank)
const char *fake_log(void) { return log_; }
void fake_reset(void) { log_[0] = 0; }
void fake_set_async_error(int code) { async_error = code; }
int ncclGetVersion(int *v) { *v = 22809; return 0; }
const char *ncclGetErrorString(int code) { return code == 4 ? "invalid argument (run with NCCL_DEBUG=WARN for details)" : "stand-in error"; }
const char *ncclGetLastError(void *c) { (void)c; return last_error; }
int ncclGetUniqueId(ncclUniqueId *id) { for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 7 + 1); id->internal[3] = 0; return 0; }
int ncclCommInitRank(void **out, int nranks, ncclUniqueId id, int rank) {
  unsigned sum = 0; for (int i = 0; i < 128; i++) sum = sum * 31u + (unsigned char)id.internal[i];
  if (nranks != 1) return fail(5, "stand-in: one rank per communicator");
  note("ncclCommInitRank nranks=%d rank=%d id=%u dev=%d", nranks, rank, sum, device());
  *out = comm(rank, nranks, device()); wander(); return 0;
}
int ncclCommInitAll(void **out, int n, const int *devs) {
  note("ncclCommInitAll n=%d devs=%d,%d", n, devs[0], n > 1 ? devs[1] : -1);
  for (int i = 0; i < n; i++) out[i] = comm(i, n, devs[i]);
  wander(); return 0;
}
int ncclCommDestroy(void *c) { note("ncclCommDestroy rank=%d", RANK(c)); wander(); return 0; }
int ncclCommAbort(void *c) { note("ncclCommAbort rank=%d", RANK(c)); return 0; }
int ncclCommGetAsyncError(void *c, int *r) { (void)c; *r = async_error; return 0; }
int ncclCommCount(void *c, int *n) { *n = ((comm_t *)c)->size; return 0; }
int ncclCommCuDevice(void *c, int *d) { *d = ((comm_t *)c)->dev; return 0; }
int ncclCommUserRank(void *c, int *r) { *r = RANK(c); return 0; }
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, void *c, void *st) {
  if (n == 13) return fail(4, "stand-in: 13 elements refused");
  note("ncclAllReduce %#llx %#llx count=%zu dtype=%d op=%d rank=%d stream=%#llx dev=%d", ull(s), ull(r), n, dt, op, RANK(c), ull(st), device()); return 0;
}
int ncclAllGather(const void *s, void *r, size_t n, int dt, void *c, void *st) {
  note("ncclAllGather %#llx %#llx count=%zu dtype=%d rank=%d stream=%#llx dev=%d", ull(s), ull(r), n, dt, RANK(c), ull(st), device()); return 0;
}
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, void *c, void *st) {
  note("ncclReduceScatter %#llx %#llx count=%zu dtype=%d op=%d rank=%d stream=%#llx dev=%d", ull(s), ull(r), n, dt, op, RANK(c), ull(st), device()); return 0;
}
int ncclSend(const void *b, size_t n, int dt, int peer, void *c, void *st) {
  note("ncclSend %#llx count=%zu dtype=%d peer=%d rank=%d stream=%#llx dev=%d", ull(b), n, dt, peer, RANK(c), ull(st), device()); return 0;
}
int ncclRecv(void *b, size_t n, int dt, int peer, void *c, void *st) {
  note("ncclRecv %#llx count=%zu dtype=%d peer=%d rank=%d stream=%#llx dev=%d", ull(b), n, dt, peer, RANK(c), ull(st), device()); return 0;
}
int ncclGroupStart(void) { note("ncclGroupStart"); return 0; }
int ncclGroupEnd(void) { note("ncclGroupEnd"); wander(); return 0; }
`;

/** Compiles both stand-ins into a new folder; undefined when there is no C compiler (the tests skip). */
function buildStandIns(): { libcuda: string; libnccl: string } | undefined {
  if (process.platform !== "linux") return undefined;
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-stand-in-cuda-nccl-"));
  const stubs = Object.keys(bindings).filter((s) => !CUDA_ANSWERED.includes(s)).map((s) => `int ${s}() { return 801; }`);
  writeFileSync(path.join(dir, "cuda.c"), `${FAKE_CUDA}\n${stubs.join("\n")}\n`);
  writeFileSync(path.join(dir, "nccl.c"), FAKE_NCCL);
  const libcuda = path.join(dir, "libcuda.so.1");
  const libnccl = path.join(dir, "libnccl.so.2");
  const cc = process.env.CC ?? "cc";
  try {
    execFileSync(cc, ["-shared", "-fPIC", "-w", "-Wl,-soname,libcuda.so.1", "-o", libcuda, path.join(dir, "cuda.c")], { stdio: "ignore" });
    // DT_RPATH (not RUNPATH): the stand-in libcuda wins over any LD_LIBRARY_PATH with a real driver in it.
    execFileSync(cc, ["-shared", "-fPIC", "-w", "-o", libnccl, path.join(dir, "nccl.c"), libcuda, `-Wl,-rpath,${dir}`, "-Wl,--disable-new-dtags"], { stdio: "ignore" });
  } catch {
    return undefined;
  }
  return { libcuda, libnccl };
}

const standIns = buildStandIns();
const skip = standIns === undefined && "needs Linux and a C compiler (cc)";
if (standIns) {
  process.env.FLASHMLA_LIBCUDA = standIns.libcuda;
  process.env.FLASHMLA_NCCL = standIns.libnccl;
}

// Imported after the environment names the stand-ins (config.ts reads FLASHMLA_LIBCUDA when loaded).
const { ArgumentError } = await import("../../../src/errors/ArgumentError.js");
const { NcclError } = await import("../../../src/errors/NcclError.js");
const { loadDriver } = await import("../../../src/driver/loadDriver.js");
const { loadKoffi } = await import("../../../src/driver/loadKoffi.js");
const { DeviceBuffer } = await import("../../../src/runtime/DeviceBuffer.js");
const { Stream } = await import("../../../src/runtime/Stream.js");
const { Tensor } = await import("../../../src/runtime/Tensor.js");
const { NcclComm, ncclGroup, ncclUniqueId, ncclVersion, ncclAvailable } = await import("../../../src/nccl/index.js");

/** The stand-in NCCL's log since the last call, one line per call. */
const log: () => string[] = (() => {
  if (!standIns) return () => [];
  const lib = loadKoffi().load(standIns.libnccl);
  const read = lib.func("const char *fake_log(void)");
  const reset = lib.func("void fake_reset(void)");
  return () => {
    const lines = (read() as string).split("\n").filter((l) => l !== "");
    reset();
    return lines;
  };
})();

const setAsyncError = (code: number) => loadKoffi().load(standIns!.libnccl).func("void fake_set_async_error(int)")(code);

/** The current context as the stand-in driver holds it: 0x1000 + device. */
function currentContext(): bigint {
  const out = new BigUint64Array(1);
  assert.equal(loadDriver().cuCtxGetCurrent(out), 0);
  return out[0];
}

/** A device tensor over fake memory at `ptr` (nothing reads it: the stand-in only logs the address). */
function fakeTensor(shape: readonly number[], dtype: DType, device: number, ptr: bigint): TensorType {
  const buffer = Object.defineProperties(Object.create(DeviceBuffer.prototype), {
    ptr: { value: ptr },
    sizeBytes: { value: 1 << 20 },
    deviceOrdinal: { value: device },
  }) as DeviceBufferType;
  return Tensor.fromDeviceBuffer(buffer, shape, dtype);
}

function fakeStream(device: number, handle: bigint): StreamType {
  return Object.defineProperties(Object.create(Stream.prototype), { deviceOrdinal: { value: device }, handle: { value: handle } }) as StreamType;
}

/** The checksum the stand-in computes over the id it received (s = s·31 + byte, 32-bit). */
function checksum(id: Uint8Array): number {
  return id.reduce((s, b) => (Math.imul(s, 31) + b) >>> 0, 0);
}

test("ncclAvailable(), ncclVersion() and ncclUniqueId() through the stand-in NCCL", { skip }, () => {
  assert.deepEqual(ncclAvailable(), { ok: true, path: standIns!.libnccl, source: "FLASHMLA_NCCL", version: { code: 22809, major: 2, minor: 28, patch: 9 } });
  assert.deepEqual(ncclVersion(), { code: 22809, major: 2, minor: 28, patch: 9 });
  const id = ncclUniqueId();
  assert.ok(id instanceof Uint8Array);
  const want = Uint8Array.from({ length: 128 }, (_, i) => (i * 7 + 1) & 0xff);
  want[3] = 0;
  assert.deepEqual(id, want);
});

test("NcclComm.initRank() passes the 128-byte id by value, on the device it makes current, and puts that context back", { skip }, () => {
  log();
  const id = ncclUniqueId();
  const comm = NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: Buffer.from(id), device: 1 });
  assert.deepEqual(log(), [`ncclCommInitRank nranks=1 rank=0 id=${checksum(id)} dev=1`]);
  assert.deepEqual([comm.rank, comm.size, comm.device], [0, 1, 1]);
  assert.equal(currentContext(), 0x1001n, "the stand-in left 0x1fff current; the binding restores cuda:1's");
  assert.equal(String(comm), "NcclComm(rank 0 of 1, cuda:1)");
  comm.dispose();
});

test("NcclComm's collectives and send/recv give NCCL every argument, on the communicator's device", { skip }, () => {
  const comm = NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: ncclUniqueId(), device: 1 });
  const stream = fakeStream(1, 0x5ean);
  const x = fakeTensor([4, 8], "bf16", 1, 0x7f0000001000n);
  const y = fakeTensor([32], "bf16", 1, 0x7f0000002000n);
  log();
  comm.allReduce(x, y, { op: "max", stream });
  comm.allReduce(x, x);
  comm.allGather(fakeTensor([8], "f32", 1, 0x10n), fakeTensor([8], "f32", 1, 0x20n), { stream });
  comm.reduceScatter(fakeTensor([6], "fp16", 1, 0x30n), fakeTensor([6], "fp16", 1, 0x40n), { op: "avg", stream: null });
  ncclGroup(() => {
    comm.send(fakeTensor([3], "i32", 1, 0x50n), 0, { stream });
    comm.recv(fakeTensor([3], "i32", 1, 0x60n), 0, { stream });
  });
  assert.deepEqual(log(), [
    "ncclAllReduce 0x7f0000001000 0x7f0000002000 count=32 dtype=9 op=2 rank=0 stream=0x5ea dev=1",
    "ncclAllReduce 0x7f0000001000 0x7f0000001000 count=32 dtype=9 op=0 rank=0 stream=0 dev=1",
    "ncclAllGather 0x10 0x20 count=8 dtype=7 rank=0 stream=0x5ea dev=1",
    "ncclReduceScatter 0x30 0x40 count=6 dtype=6 op=4 rank=0 stream=0 dev=1",
    "ncclGroupStart",
    "ncclSend 0x50 count=3 dtype=2 peer=0 rank=0 stream=0x5ea dev=1",
    "ncclRecv 0x60 count=3 dtype=2 peer=0 rank=0 stream=0x5ea dev=1",
    "ncclGroupEnd",
  ]);
  assert.equal(currentContext(), 0x1001n);
  comm.dispose();
});

test("an NCCL error names the call, the code, NCCL's description and its last error", { skip }, () => {
  const comm = NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: ncclUniqueId(), device: 0 });
  const x = fakeTensor([13], "f32", 0, 0x100n);
  assert.throws(
    () => comm.allReduce(x, x),
    (e: unknown) => {
      assert.ok(e instanceof NcclError);
      assert.equal(e.message, "ncclAllReduce failed: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details); NCCL's last error: stand-in: 13 elements refused");
      assert.deepEqual([e.callName, e.code, e.errorName, e.lastError], ["ncclAllReduce", 4, "ncclInvalidArgument", "stand-in: 13 elements refused"]);
      return true;
    },
  );
  assert.throws(() => NcclComm.initRank({ nranks: 2, rank: 1, uniqueId: ncclUniqueId() }), {
    name: "NcclError",
    message: "ncclCommInitRank failed: ncclInvalidUsage (5): stand-in error; NCCL's last error: stand-in: one rank per communicator",
  });
  comm.dispose();
});

test("asyncError() is undefined while all is well and an NcclError once NCCL records one", { skip }, () => {
  const comm = NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: ncclUniqueId(), device: 0 });
  assert.equal(comm.asyncError(), undefined);
  setAsyncError(7);
  assert.equal(comm.asyncError(), undefined, "ncclInProgress is not an error");
  setAsyncError(6);
  const e = comm.asyncError();
  assert.ok(e instanceof NcclError);
  assert.deepEqual([e.callName, e.code, e.errorName], ["ncclCommGetAsyncError", 6, "ncclRemoteError"]);
  setAsyncError(0);
  comm.abort();
});

test("dispose() destroys once however often it is called; abort() aborts; a disposed communicator says so", { skip }, () => {
  const comm = NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: ncclUniqueId(), device: 1 });
  log();
  comm.dispose();
  comm.dispose();
  comm.abort();
  assert.deepEqual(log(), ["ncclCommDestroy rank=0"]);
  assert.equal(comm.disposed, true);
  const x = fakeTensor([4], "f32", 1, 0x100n);
  assert.throws(() => comm.allReduce(x, x), { message: "NcclComm.allReduce(): NcclComm (rank 0 of 1 on cuda:1) was already disposed" });
  assert.throws(() => comm.handle, { message: "NcclComm.handle(): NcclComm (rank 0 of 1 on cuda:1) was already disposed" });

  const other = NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: ncclUniqueId(), device: 0 });
  log();
  {
    using scoped = other;
    scoped.abort();
  }
  assert.deepEqual(log(), ["ncclCommAbort rank=0"], "abort, and no destroy at the end of the using block");
});

test("NcclComm.initAll() opens one rank per device; their calls must be grouped, and disposeAll() frees them in a group", { skip }, () => {
  log();
  const comms = NcclComm.initAll([1, 0]);
  assert.deepEqual(log(), ["ncclCommInitAll n=2 devs=1,0"]);
  assert.deepEqual(comms.map((c) => [c.rank, c.size, c.device]), [[0, 2, 1], [1, 2, 0]]);
  const xs = comms.map((c, i) => fakeTensor([2], "f32", c.device, BigInt(0x1000 * (i + 1))));
  assert.throws(() => comms[0].allReduce(xs[0], xs[0]), /^Error: NcclComm\.allReduce\(\): NcclComm\(rank 0 of 2, cuda:1\) is one of the 2 communicators NcclComm\.initAll made for this thread; make this call on each of them inside ncclGroup/);
  assert.deepEqual(log(), [], "nothing reached NCCL");
  ncclGroup(() => comms.forEach((c, i) => c.allReduce(xs[i], xs[i])));
  assert.deepEqual(log(), [
    "ncclGroupStart",
    "ncclAllReduce 0x1000 0x1000 count=2 dtype=7 op=0 rank=0 stream=0 dev=1",
    "ncclAllReduce 0x2000 0x2000 count=2 dtype=7 op=0 rank=1 stream=0 dev=0",
    "ncclGroupEnd",
  ]);
  NcclComm.disposeAll(comms);
  NcclComm.disposeAll(comms);
  assert.deepEqual(log(), ["ncclGroupStart", "ncclCommDestroy rank=0", "ncclCommDestroy rank=1", "ncclGroupEnd"]);
});

test("ncclGroup() ends the group when its function throws, and refuses an async function", { skip }, () => {
  log();
  assert.throws(() => ncclGroup(() => { throw new RangeError("inside the group"); }), { name: "RangeError", message: "inside the group" });
  assert.deepEqual(log(), ["ncclGroupStart", "ncclGroupEnd"]);
  assert.throws(() => ncclGroup(async () => {}), { name: "ArgumentError", message: "ncclGroup(): argument 'fn': expected a synchronous function, got a function returning a Promise" });
  assert.deepEqual(log(), ["ncclGroupStart", "ncclGroupEnd"]);
  assert.equal(ncclGroup(() => ncclGroup(() => 42)), 42, "groups nest and return fn's value");
  assert.deepEqual(log(), ["ncclGroupStart", "ncclGroupStart", "ncclGroupEnd", "ncclGroupEnd"]);
});

test("NcclComm.initAll() and initRank() name each wrong argument before NCCL sees it", { skip }, () => {
  const any = <T>(v: unknown) => v as T;
  log();
  const cases: [() => unknown, string][] = [
    [() => NcclComm.initAll([]), "NcclComm.initAll(): argument 'deviceOrdinals': expected a non-empty array of CUDA device ordinals, got []"],
    [() => NcclComm.initAll([0, 0]), "NcclComm.initAll(): argument 'deviceOrdinals': expected distinct ordinals (NCCL refuses two ranks on one GPU), got [0,0]"],
    [() => NcclComm.initAll([0, -1]), "NcclComm.initAll(): argument 'deviceOrdinals[1]': expected a non-negative integer, got -1"],
    [() => NcclComm.initAll(any(0)), "NcclComm.initAll(): argument 'deviceOrdinals': expected a non-empty array of CUDA device ordinals, got 0"],
    [() => NcclComm.initRank(any(undefined)), "NcclComm.initRank(): argument 'options.nranks': expected a positive integer, got undefined"],
    [() => NcclComm.initRank({ nranks: 0, rank: 0, uniqueId: new Uint8Array(128) }), "NcclComm.initRank(): argument 'options.nranks': expected a positive integer, got 0"],
    [() => NcclComm.initRank({ nranks: 2, rank: 2, uniqueId: new Uint8Array(128) }), "NcclComm.initRank(): argument 'options.rank': expected an integer in [0, 1], got 2"],
    [() => NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: new Uint8Array(64) }), "NcclComm.initRank(): argument 'options.uniqueId': expected the 128 bytes of ncclUniqueId() (a Uint8Array), got 64 bytes"],
    [() => NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: any("id") }), "NcclComm.initRank(): argument 'options.uniqueId': expected the 128 bytes of ncclUniqueId() (a Uint8Array), got string id"],
    [() => NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: new Uint8Array(128), device: any("1") }), "NcclComm.initRank(): argument 'options.device': expected a non-negative integer, got string 1"],
  ];
  for (const [call, message] of cases) {
    assert.throws(call, (e: unknown) => e instanceof ArgumentError && e.message === message, message);
  }
  assert.deepEqual(log(), []);
});
