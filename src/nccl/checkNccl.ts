import { NcclError } from "../errors/NcclError.js";
import type { NcclApi } from "./ncclBindings.js";
import { ncclResultName, NcclResult } from "./ncclEnums.js";

/**
 * Throws an NcclError unless `result` is ncclSuccess. `callName` is the NCCL symbol that returned it;
 * `comm` (when the call had one) is passed to ncclGetLastError.
 */
export function checkNccl(api: NcclApi, result: number, callName: string, comm = 0n): void {
  if (result !== NcclResult.Success) throw ncclErrorFor(api, result, callName, comm);
}

/**
 * Builds the NcclError for `code` returned by `callName`, with ncclGetErrorString's description and,
 * where the library has it (2.13+) and it says something, ncclGetLastError's message.
 */
export function ncclErrorFor(api: NcclApi, code: number, callName: string, comm = 0n): NcclError {
  const description = ask(() => api.ncclGetErrorString(code)) || "no description from NCCL";
  const lastError = api.ncclGetLastError ? ask(() => api.ncclGetLastError!(comm)) : undefined;
  return new NcclError(callName, code, ncclResultName(code), description, lastError?.trim() || undefined);
}

/** A string NCCL returns, or undefined when the call throws or gives NULL: the code alone still says what failed. */
function ask(call: () => string | null): string | undefined {
  try {
    return call() ?? undefined;
  } catch {
    return undefined;
  }
}
