import type { Koffi } from "../driver/loadKoffi.js";
import { NCCL_UNIQUE_ID_BYTES } from "./ncclEnums.js";

/**
 * The NCCL functions, as koffi calls them. Handles (ncclComm_t, cudaStream_t) are bigints, 0n for
 * NULL and for the legacy default stream; device addresses are bigints too.
 */
export interface NcclApi {
  ncclGetVersion(version: Int32Array): number;
  ncclGetErrorString(code: number): string;
  /** NCCL 2.13 and newer. */
  ncclGetLastError?(comm: bigint): string;
  ncclGetUniqueId(uniqueId: Uint8Array): number;
  ncclCommInitRank(comm: BigUint64Array, nranks: number, uniqueId: { internal: Uint8Array }, rank: number): number;
  ncclCommInitAll(comms: BigUint64Array, ndev: number, devlist: Int32Array): number;
  ncclCommDestroy(comm: bigint): number;
  ncclCommAbort(comm: bigint): number;
  ncclCommGetAsyncError(comm: bigint, asyncError: Int32Array): number;
  ncclCommCount(comm: bigint, count: Int32Array): number;
  ncclCommCuDevice(comm: bigint, device: Int32Array): number;
  ncclCommUserRank(comm: bigint, rank: Int32Array): number;
  ncclAllReduce(send: bigint, recv: bigint, count: number, dtype: number, op: number, comm: bigint, stream: bigint): number;
  ncclAllGather(send: bigint, recv: bigint, sendcount: number, dtype: number, comm: bigint, stream: bigint): number;
  ncclReduceScatter(send: bigint, recv: bigint, recvcount: number, dtype: number, op: number, comm: bigint, stream: bigint): number;
  ncclSend(send: bigint, count: number, dtype: number, peer: number, comm: bigint, stream: bigint): number;
  ncclRecv(recv: bigint, count: number, dtype: number, peer: number, comm: bigint, stream: bigint): number;
  ncclGroupStart(): number;
  ncclGroupEnd(): number;
}

/**
 * The NCCL functions we call, as a declarative table `symbol: [returnType, [argTypes]]` in nccl.h's
 * order, with two deliberate departures from the header's spelling, both ABI-identical:
 * - device buffers (`const void *sendbuff`, `void *recvbuff`) are `uint64_t`, as the driver passes a
 *   CUdeviceptr: a 64-bit integer in the same register as a pointer on x86-64 and aarch64, and the
 *   way the GPU host verified the collectives (NCCL-NOTES.md);
 * - ncclGetUniqueId's `ncclUniqueId *` is `uint8_t *`, so that a 128-byte Uint8Array is the id.
 * ncclCommInitRank takes the id by value: `ncclUniqueId` is registered as nccl.h's struct of 128
 * chars (registerNcclTypes), which koffi copies into the call as the C ABI passes such a struct.
 */
export const ncclBindings = {
  ncclGetVersion: ["ncclResult_t", ["int *"]],
  ncclGetErrorString: ["const char *", ["ncclResult_t"]],
  ncclGetLastError: ["const char *", ["ncclComm_t"]],

  // Communicator creation and management
  ncclGetUniqueId: ["ncclResult_t", ["uint8_t *"]],
  ncclCommInitRank: ["ncclResult_t", ["ncclComm_t *", "int", "ncclUniqueId", "int"]],
  ncclCommInitAll: ["ncclResult_t", ["ncclComm_t *", "int", "const int *"]],
  ncclCommDestroy: ["ncclResult_t", ["ncclComm_t"]],
  ncclCommAbort: ["ncclResult_t", ["ncclComm_t"]],
  ncclCommGetAsyncError: ["ncclResult_t", ["ncclComm_t", "ncclResult_t *"]],
  ncclCommCount: ["ncclResult_t", ["ncclComm_t", "int *"]],
  ncclCommCuDevice: ["ncclResult_t", ["ncclComm_t", "int *"]],
  ncclCommUserRank: ["ncclResult_t", ["ncclComm_t", "int *"]],

  // Collectives and point-to-point
  ncclAllReduce: ["ncclResult_t", ["uint64_t", "uint64_t", "size_t", "ncclDataType_t", "ncclRedOp_t", "ncclComm_t", "cudaStream_t"]],
  ncclAllGather: ["ncclResult_t", ["uint64_t", "uint64_t", "size_t", "ncclDataType_t", "ncclComm_t", "cudaStream_t"]],
  ncclReduceScatter: ["ncclResult_t", ["uint64_t", "uint64_t", "size_t", "ncclDataType_t", "ncclRedOp_t", "ncclComm_t", "cudaStream_t"]],
  ncclSend: ["ncclResult_t", ["uint64_t", "size_t", "ncclDataType_t", "int", "ncclComm_t", "cudaStream_t"]],
  ncclRecv: ["ncclResult_t", ["uint64_t", "size_t", "ncclDataType_t", "int", "ncclComm_t", "cudaStream_t"]],

  // Group calls
  ncclGroupStart: ["ncclResult_t", []],
  ncclGroupEnd: ["ncclResult_t", []],
} as const satisfies Record<keyof NcclApi, readonly [string, readonly string[]]>;

/**
 * Symbols a usable NCCL may lack: bound when present, else left undefined. ncclGetLastError
 * appeared in 2.13; everything else is in every NCCL since 2.7 (send/recv).
 */
export const optionalNcclSymbols: ReadonlySet<string> = new Set(["ncclGetLastError"] satisfies (keyof NcclApi)[]);

const registered = new WeakSet<object>();

/** Declares nccl.h's type names with koffi, once per koffi instance (koffi's names are global). */
export function registerNcclTypes(koffi: Koffi): void {
  if (registered.has(koffi)) return;
  koffi.alias("ncclResult_t", "int");
  koffi.alias("ncclDataType_t", "int");
  koffi.alias("ncclRedOp_t", "int");
  koffi.pointer("ncclComm_t", koffi.opaque());
  koffi.pointer("cudaStream_t", koffi.opaque());
  // nccl.h: typedef struct { char internal[128]; } ncclUniqueId. koffi fills a char array from a
  // Uint8Array byte for byte (zero bytes included); only reading one back would give a string.
  koffi.struct("ncclUniqueId", { internal: koffi.array("char", NCCL_UNIQUE_ID_BYTES) });
  registered.add(koffi);
}
