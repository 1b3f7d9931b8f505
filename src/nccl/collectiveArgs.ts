import { ArgumentError, describeValue, formatGot, formatShape, optionsObject } from "../errors/ArgumentError.js";
import { requireStream, type Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { ncclVersionCode, type NcclVersion } from "./decodeNcclVersion.js";
import { ncclDataTypeOf } from "./ncclDataType.js";
import { ncclRedOp, type NcclReduceOp } from "./ncclEnums.js";

/** Options of every collective and point-to-point call. */
export interface NcclStreamOptions {
  /**
   * The stream the operation is queued on; it must be on the communicator's device. The call only
   * queues work (it never synchronizes), so it can be captured into a CUDA graph on that stream.
   * @default the legacy default stream (null or undefined)
   */
  stream?: Stream | null;
}

/** Options of the reducing collectives (allReduce, reduceScatter). */
export interface NcclReduceOptions extends NcclStreamOptions {
  /** How elements of the ranks are combined; "avg" needs NCCL 2.10 or newer. @default "sum" */
  op?: NcclReduceOp;
}

/** What the checks need to know of a communicator. */
export interface CommFacts {
  /** Ranks in the communicator. */
  readonly size: number;
  /** The CUDA device ordinal its tensors and streams must be on. */
  readonly device: number;
  /** The loaded NCCL's version (some dtypes and ops are newer than others). */
  readonly version: NcclVersion;
}

/** A collective's arguments, checked and converted for the NCCL call. */
export interface CollectiveCall {
  send: bigint;
  recv: bigint;
  /** Elements per rank, as NCCL counts them (allGather: sendcount; reduceScatter: recvcount). */
  count: number;
  dtype: number;
  /** ncclRedOp_t; 0 for allGather, which does not reduce. */
  op: number;
  stream: bigint;
}

/** A send's or a recv's arguments, checked and converted. */
export interface PeerCall {
  buffer: bigint;
  count: number;
  dtype: number;
  peer: number;
  stream: bigint;
}

const AVG_SINCE = ncclVersionCode(2, 10, 0);
const FP8_REDUCE_SINCE = ncclVersionCode(2, 24, 0);

/** allReduce: `recv` holds as many elements as `send` (the same tensor for in place). */
export function checkAllReduceArgs(fn: string, comm: CommFacts, send: Tensor, recv: Tensor, options: NcclReduceOptions | undefined): CollectiveCall {
  const o = optionsObject(fn, "options", options);
  const [s, r] = sendAndRecv(fn, comm, send, recv);
  if (r.numel !== s.numel) throw new ArgumentError(fn, "recv", `${s.numel} elements (as many as send)`, elements(r));
  return { send: s.ptr, recv: r.ptr, count: s.numel, dtype: reducedDtype(fn, comm, s), op: reduceOp(fn, comm, o.op), stream: streamFor(fn, comm, o.stream) };
}

/** allGather: `recv` holds size × `send`'s elements, rank i's part at i × send.numel. */
export function checkAllGatherArgs(fn: string, comm: CommFacts, send: Tensor, recv: Tensor, options: NcclStreamOptions | undefined): CollectiveCall {
  const o = optionsObject(fn, "options", options);
  const [s, r] = sendAndRecv(fn, comm, send, recv);
  const want = comm.size * s.numel;
  if (r.numel !== want) throw new ArgumentError(fn, "recv", `${want} elements (size ${comm.size} × send's ${s.numel})`, elements(r));
  return { send: s.ptr, recv: r.ptr, count: s.numel, dtype: ncclDataTypeOf(s.dtype, "copy"), op: 0, stream: streamFor(fn, comm, o.stream) };
}

/** reduceScatter: `send` holds size equal parts; `recv` gets the reduction of part `rank`. */
export function checkReduceScatterArgs(fn: string, comm: CommFacts, send: Tensor, recv: Tensor, options: NcclReduceOptions | undefined): CollectiveCall {
  const o = optionsObject(fn, "options", options);
  const [s, r] = sendAndRecv(fn, comm, send, recv);
  if (s.numel % comm.size !== 0) throw new ArgumentError(fn, "send", `a multiple of ${comm.size} elements (one equal part per rank)`, elements(s));
  const count = s.numel / comm.size;
  if (r.numel !== count) throw new ArgumentError(fn, "recv", `${count} elements (send's ${s.numel} / size ${comm.size})`, elements(r));
  return { send: s.ptr, recv: r.ptr, count, dtype: reducedDtype(fn, comm, s), op: reduceOp(fn, comm, o.op), stream: streamFor(fn, comm, o.stream) };
}

/** send/recv: the whole tensor goes to (comes from) rank `peer`; the peer's tensor must have as many bytes. */
export function checkPeerArgs(fn: string, comm: CommFacts, tensor: Tensor, peer: number, options: NcclStreamOptions | undefined): PeerCall {
  const o = optionsObject(fn, "options", options);
  const t = commTensor(fn, comm, "tensor", tensor);
  if (typeof peer !== "number" || !Number.isSafeInteger(peer) || peer < 0 || peer >= comm.size) {
    throw new ArgumentError(fn, "peer", `a rank in [0, ${comm.size - 1}]`, formatGot(peer));
  }
  return { buffer: t.ptr, count: t.numel, dtype: ncclDataTypeOf(t.dtype, "copy"), peer, stream: streamFor(fn, comm, o.stream) };
}

function sendAndRecv(fn: string, comm: CommFacts, send: Tensor, recv: Tensor): [Tensor, Tensor] {
  const s = commTensor(fn, comm, "send", send);
  const r = commTensor(fn, comm, "recv", recv);
  if (r.dtype !== s.dtype) throw new ArgumentError(fn, "recv", `dtype ${s.dtype} (send's)`, r.dtype);
  return [s, r];
}

/** A CUDA tensor on the communicator's device, dense: NCCL reads and writes one range of memory. */
function commTensor(fn: string, comm: CommFacts, argument: string, t: unknown): Tensor {
  if (!(t instanceof Tensor)) throw new ArgumentError(fn, argument, "a Tensor", describeValue(t));
  if (t.deviceOrdinal !== comm.device) {
    throw new ArgumentError(fn, argument, `a tensor on cuda:${comm.device} (the communicator's device)`, `a tensor on ${t.device}`);
  }
  if (!t.isContiguous()) throw new ArgumentError(fn, argument, "a contiguous tensor", `strides ${formatShape(t.strides)} for shape ${formatShape(t.shape)}`);
  return t;
}

function reducedDtype(fn: string, comm: CommFacts, send: Tensor): number {
  if (send.dtype === "fp8_e4m3" && comm.version.code < FP8_REDUCE_SINCE) {
    throw new ArgumentError(fn, "send", `a dtype NCCL ${versionText(comm.version)} reduces (fp8_e4m3 needs NCCL 2.24 or newer)`, send.dtype);
  }
  return ncclDataTypeOf(send.dtype, "reduce");
}

function reduceOp(fn: string, comm: CommFacts, op: unknown): number {
  const name = op ?? "sum";
  if (typeof name !== "string" || !Object.hasOwn(ncclRedOp, name)) {
    const names = Object.keys(ncclRedOp).map((n) => JSON.stringify(n));
    throw new ArgumentError(fn, "options.op", `one of ${names.join(", ")}`, typeof op === "string" ? JSON.stringify(op) : formatGot(op));
  }
  if (name === "avg" && comm.version.code < AVG_SINCE) {
    throw new ArgumentError(fn, "options.op", `an op NCCL ${versionText(comm.version)} has ("avg" needs NCCL 2.10 or newer)`, '"avg"');
  }
  return ncclRedOp[name as NcclReduceOp];
}

/** The CUstream for `stream`: 0n (the legacy default stream) for null or undefined. */
function streamFor(fn: string, comm: CommFacts, stream: unknown): bigint {
  if (stream === undefined || stream === null) return 0n;
  const s = requireStream(fn, "options.stream", stream, "a Stream, null or undefined (the legacy default stream)");
  if (s.deviceOrdinal !== comm.device) {
    throw new ArgumentError(fn, "options.stream", `a Stream on cuda:${comm.device} (the communicator's device)`, `a Stream on cuda:${s.deviceOrdinal}`);
  }
  return s.handle;
}

function elements(t: Tensor): string {
  return `${t.numel} (shape ${formatShape(t.shape)})`;
}

function versionText(v: NcclVersion): string {
  return `${v.major}.${v.minor}.${v.patch}`;
}
