import { checkNccl } from "./checkNccl.js";
import { NCCL_UNIQUE_ID_BYTES } from "./ncclEnums.js";
import { loadNccl } from "./loadNccl.js";

/**
 * A new NCCL unique id (ncclGetUniqueId): 128 bytes that name one communicator to be made. Call it
 * on one rank and give the same bytes to every rank's `NcclComm.initRank`. A Uint8Array crosses
 * `worker.postMessage` as is; to a child process, send it as text.
 *
 * @example
 * const id = ncclUniqueId();
 * const child = fork("rank.js", [Buffer.from(id).toString("base64")]);
 * // in rank.js: NcclComm.initRank({ nranks, rank, uniqueId: new Uint8Array(Buffer.from(process.argv[2], "base64")) })
 * @throws NcclUnavailableError when NCCL cannot be loaded; NcclError when NCCL fails (e.g. no network interface).
 */
export function ncclUniqueId(): Uint8Array {
  const { api } = loadNccl();
  const id = new Uint8Array(NCCL_UNIQUE_ID_BYTES);
  checkNccl(api, api.ncclGetUniqueId(id), "ncclGetUniqueId");
  return id;
}
