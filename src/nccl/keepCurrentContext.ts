import { driverStatus } from "../driver/loadDriver.js";

const before = new BigUint64Array(1);
const after = new BigUint64Array(1);

/**
 * Runs an NCCL call, then makes the CUDA context that was current before it current again. NCCL
 * drives devices through the runtime API (cudaSetDevice to each communicator's device); it restores
 * the caller's device on its success paths, but not on every failure path, and the runtime layer
 * (Device.makeCurrent) trusts that the context it last made current still is. Two cheap driver calls
 * when nothing moved; allowed during stream capture. Adds no error of its own: without a driver, or
 * without a current context, it just runs the call.
 */
export function keepCurrentContext<T>(call: () => T): T {
  const status = driverStatus();
  const api = status.ok ? status.api : undefined;
  const context = api !== undefined && api.cuCtxGetCurrent(before) === 0 ? before[0] : 0n;
  try {
    return call();
  } finally {
    if (api !== undefined && context !== 0n && api.cuCtxGetCurrent(after) === 0 && after[0] !== context) api.cuCtxSetCurrent(context);
  }
}
