/**
 * flashmla-ts/nccl: NCCL from TypeScript, for running one decode step over the GPUs of a host.
 * libnccl.so.2 is found at first use (FLASHMLA_NCCL, the system loader, Python's nvidia/nccl/lib);
 * NVLink multicast stays off (NCCL_NVLS_ENABLE=0) unless the environment sets it.
 */
export { NcclComm, type NcclInitRankOptions } from "./NcclComm.js";
export { ncclGroup } from "./ncclGroup.js";
export { ncclUniqueId } from "./ncclUniqueId.js";
export { ncclVersion } from "./ncclVersion.js";
export { ncclAvailable } from "./loadNccl.js";
export { ncclDataTypeOf, type NcclElementUse } from "./ncclDataType.js";
export { NcclDataType, type NcclReduceOp } from "./ncclEnums.js";
export type { NcclReduceOptions, NcclStreamOptions } from "./collectiveArgs.js";
export type { NcclVersion } from "./decodeNcclVersion.js";
export type { NcclSource } from "./ncclCandidates.js";
export { NcclError } from "../errors/NcclError.js";
export { NcclUnavailableError } from "../errors/NcclUnavailableError.js";
