import type { NcclVersion } from "./decodeNcclVersion.js";
import { loadNccl } from "./loadNccl.js";

/**
 * The version of the loaded NCCL (ncclGetVersion), e.g. { code: 22809, major: 2, minor: 28, patch: 9 }.
 * @throws NcclUnavailableError when NCCL cannot be loaded.
 */
export function ncclVersion(): NcclVersion {
  return loadNccl().version;
}
