import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { NcclComm } from "../../../src/nccl/NcclComm.js";
import { ncclAvailable } from "../../../src/nccl/loadNccl.js";
import { ncclGroup } from "../../../src/nccl/ncclGroup.js";
import { ncclUniqueId } from "../../../src/nccl/ncclUniqueId.js";
import { ncclVersion } from "../../../src/nccl/ncclVersion.js";
import type { Device } from "../../../src/runtime/Device.js";
import { Graph } from "../../../src/runtime/Graph.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor, type FloatDType } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";

// The NCCL binding on one GPU: one-rank communicators (NCCL refuses two ranks on one GPU), made both
// ways, running each call for real. With one rank, a reduction or a gather gives back the input, so
// every output is first poisoned with NaN bytes and must come back exactly equal to the input.

const N = 4096;

/** Distinct values every dtype holds exactly: multiples of 1/8 in [-256, 256). */
function values(seed: number): Float32Array {
  return Float32Array.from({ length: N }, (_, i) => (((i * 37 + seed * 101) % 4096) - 2048) / 8);
}

/**
 * A device tensor of `values(seed)` in `dtype`, on cuda:0, copied on `stream` (the legacy default
 * stream when absent), so that calls queued on the same stream see it.
 */
function input(seed: number, dtype: FloatDType, stream?: Stream): Tensor {
  return Tensor.toDevice(Tensor.fromFloat32(values(seed), [N], dtype), 0, stream);
}

/** A device tensor of NaN (every byte 0xff), queued on `stream`. */
function poisoned(shape: readonly number[], dtype: FloatDType, stream: Stream): Tensor {
  const t = Tensor.emptyDevice(shape, dtype, 0);
  t.buffer!.memset8(0xff, 0, undefined, stream);
  return t;
}

type MakeComm = () => NcclComm;

const makers: [string, MakeComm][] = [
  ["initAll([0])", () => NcclComm.initAll([0])[0]],
  ["initRank() with a fresh unique id", () => NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: ncclUniqueId(), device: 0 })],
];

function ncclTests(device: Device): void {
  const nccl = ncclAvailable();
  if (!nccl.ok) {
    test("NCCL one-rank communicators", { skip: `SKIPPED: no NCCL: ${nccl.reason.split(". Install")[0]}` }, () => {});
    return;
  }
  process.stderr.write(`NCCL ${ncclVersion().major}.${ncclVersion().minor}.${ncclVersion().patch} from ${nccl.path} (${nccl.source}) on ${device.name}\n`);

  test("NCCL is 2.7 or newer, with multicast off unless the environment turned it on", () => {
    const v = ncclVersion();
    assert.equal(v.major, 2);
    assert.ok(v.minor >= 7, `NCCL ${v.major}.${v.minor}`);
    assert.ok(process.env.NCCL_NVLS_ENABLE !== undefined, "set before the first load");
  });

  for (const [how, make] of makers) {
    test(`${how}: rank 0 of 1 on cuda:0; allReduce, allGather and reduceScatter give the input back, f32 and bf16`, () => {
      using comm = make();
      assert.deepEqual([comm.rank, comm.size, comm.device], [0, 1, 0]);
      using stream = Stream.create(0);
      for (const dtype of ["f32", "bf16"] as const) {
        const want = Tensor.fromFloat32(values(1), [N], dtype).toFloat32();
        using x = input(1, dtype, stream);
        for (const op of ["sum", "max", "avg"] as const) {
          using out = poisoned([N], dtype, stream);
          comm.allReduce(x, out, { op, stream });
          assert.deepEqual(out.toFloat32(stream), want, `allReduce ${op} ${dtype}`);
        }
        using gathered = poisoned([1, N], dtype, stream);
        comm.allGather(x, gathered, { stream });
        assert.deepEqual(gathered.toFloat32(stream), want, `allGather ${dtype}`);
        using scattered = poisoned([N], dtype, stream);
        comm.reduceScatter(x, scattered, { stream });
        assert.deepEqual(scattered.toFloat32(stream), want, `reduceScatter ${dtype}`);
      }
      // In place, on the legacy default stream.
      using y = input(2, "f32");
      comm.allReduce(y, y);
      assert.deepEqual(y.toFloat32(), values(2), "allReduce in place");
      assert.equal(comm.asyncError(), undefined);
    });
  }

  test("send and recv to itself inside a group copy the tensor", () => {
    using comm = NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: ncclUniqueId(), device: 0 });
    using stream = Stream.create(0);
    using x = input(3, "bf16", stream);
    using y = poisoned([N], "bf16", stream);
    ncclGroup(() => {
      comm.send(x, 0, { stream });
      comm.recv(y, 0, { stream });
    });
    assert.deepEqual(y.toFloat32(stream), x.toFloat32());
  });

  test("an allReduce captured into a CUDA graph replays with the inputs of each replay", () => {
    using comm = NcclComm.initAll([0])[0];
    using stream = Stream.create(0);
    using x = input(4, "f32", stream);
    using y = poisoned([N], "f32", stream);
    // Once outside the capture, so NCCL connects before it (run-time connection setup).
    comm.allReduce(x, y, { stream });
    stream.synchronize();
    using graph = Graph.capture(stream, () => comm.allReduce(x, y, { stream }));
    for (let replay = 0; replay < 3; replay++) {
      const fresh = values(10 + replay);
      x.buffer!.copyFromHost(fresh);
      device.synchronize();
      y.buffer!.memset8(0xff, 0, undefined, stream);
      graph.launch(stream);
      assert.deepEqual(y.toFloat32(stream), fresh, `replay ${replay}`);
    }
    assert.equal(comm.asyncError(), undefined);
  });

  test("a wrong-size argument is an ArgumentError before NCCL sees it", () => {
    using comm = NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: ncclUniqueId(), device: 0 });
    using x = input(5, "f32");
    using small = Tensor.emptyDevice([N - 1], "f32", 0);
    assert.throws(() => comm.allGather(x, small), (e: unknown) => {
      assert.ok(e instanceof ArgumentError);
      assert.equal(e.message, `NcclComm.allGather(): argument 'recv': expected ${N} elements (size 1 × send's ${N}), got ${N - 1} (shape [${N - 1}])`);
      return true;
    });
    assert.throws(() => comm.allReduce(x, small), ArgumentError);
    assert.throws(() => comm.reduceScatter(x, small), ArgumentError);
  });

  test("dispose() twice is fine; abort() after it does nothing; a disposed communicator refuses calls", () => {
    const comm = NcclComm.initRank({ nranks: 1, rank: 0, uniqueId: ncclUniqueId(), device: 0 });
    comm.dispose();
    comm.dispose();
    comm.abort();
    using x = input(6, "f32");
    assert.throws(() => comm.allReduce(x, x), /NcclComm\.allReduce\(\): NcclComm \(rank 0 of 1 on cuda:0\) was already disposed/);
    const aborted = NcclComm.initAll([0]);
    aborted[0].abort();
    NcclComm.disposeAll(aborted);
  });
}

describeGpu("NCCL one-rank communicators on one GPU", ncclTests, { needsKernels: false });
