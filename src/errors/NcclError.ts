/**
 * An NCCL call returned an error, or a communicator reports one. The message names the call, the
 * ncclResult_t's name and code, NCCL's description of the code and, where NCCL kept one, its last
 * error message (what went wrong, in NCCL's words), e.g.
 * `ncclAllReduce failed: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details);
 * NCCL's last error: AllReduce : invalid root 0 (root should be in the 0..-1 range)`.
 */
export class NcclError extends Error {
  override readonly name = "NcclError";
  constructor(
    /** The NCCL symbol that failed, e.g. "ncclCommInitRank", or "ncclCommGetAsyncError" for an asynchronous error. */
    readonly callName: string,
    /** The ncclResult_t code. */
    readonly code: number,
    /** nccl.h's name of the code, e.g. "ncclInvalidArgument". */
    readonly errorName: string,
    /** ncclGetErrorString's answer. */
    readonly errorString: string,
    /**
     * ncclGetLastError's answer (NCCL 2.13 and newer), when it had one: NCCL's own message for the
     * last error it met, usually this one's (NCCL does not clear it, so it can be an earlier one's).
     */
    readonly lastError?: string,
  ) {
    super(`${callName} failed: ${errorName} (${code}): ${errorString}${lastError ? `; NCCL's last error: ${lastError}` : ""}`);
  }
}
