import { ArgumentError, describeValue } from "../errors/ArgumentError.js";
import { checkNccl } from "./checkNccl.js";
import { keepCurrentContext } from "./keepCurrentContext.js";
import { loadNccl } from "./loadNccl.js";

/** Groups open on this thread (ncclGroup calls nest; NCCL launches when the outermost ends). */
let depth = 0;

/** How many ncclGroup calls are running on this thread (0 outside any). */
export function ncclGroupDepth(): number {
  return depth;
}

/**
 * Runs `fn` between ncclGroupStart and ncclGroupEnd and returns what it returns: the NCCL calls it
 * makes are launched together when it returns. Needed wherever one thread drives several
 * communicators (those of one `NcclComm.initAll` call: without the group, the first collective waits
 * forever for the others), and to pair a send with a recv (to itself, or to a peer that sends back).
 * Calls nest. `fn` must be synchronous; the group is ended even when it throws, and its error wins.
 *
 * @example
 * const comms = NcclComm.initAll([0, 1]);
 * ncclGroup(() => comms.forEach((comm, i) => comm.allReduce(x[i], x[i], { stream: streams[i] })));
 */
export function ncclGroup<T>(fn: () => T): T {
  if (typeof fn !== "function") throw new ArgumentError("ncclGroup", "fn", "a function", describeValue(fn));
  const { api } = loadNccl();
  checkNccl(api, api.ncclGroupStart(), "ncclGroupStart");
  depth++;
  let result: T | undefined;
  let failure: { error: unknown } | undefined;
  try {
    result = fn();
    if (result !== null && typeof result === "object" && typeof (result as { then?: unknown }).then === "function") {
      throw new ArgumentError("ncclGroup", "fn", "a synchronous function", "a function returning a Promise");
    }
  } catch (error) {
    failure = { error };
  } finally {
    depth--;
  }
  const rc = keepCurrentContext(() => api.ncclGroupEnd());
  if (failure) throw failure.error;
  checkNccl(api, rc, "ncclGroupEnd");
  return result as T;
}
