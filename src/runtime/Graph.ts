import { ArgumentError, describeValue } from "../errors/ArgumentError.js";
import { check } from "../driver/check.js";
import { CUflags } from "../driver/cudaEnums.js";
import { driverOn } from "./Device.js";
import { DisposeOnce } from "./DisposeOnce.js";
import { requireStream, type Stream } from "./Stream.js";

/** Captures in progress (Graph.capture), so library code can avoid calls that capture forbids. */
let capturesInProgress = 0;

/** True while a Graph.capture's function runs (global mode: event queries, host waits would fail). */
export function graphCaptureInProgress(): boolean {
  return capturesInProgress > 0;
}

/**
 * A captured and instantiated CUDA graph: replays a fixed sequence of stream work (copies, memsets,
 * kernel launches with their arguments as captured) with one launch call.
 */
export class Graph {
  readonly #exec: bigint;
  readonly #state: DisposeOnce;

  private constructor(graph: bigint, exec: bigint, readonly deviceOrdinal: number) {
    this.#exec = exec;
    this.#state = new DisposeOnce(
      () => `Graph on cuda:${deviceOrdinal}`,
      () => {
        const api = driverOn(deviceOrdinal);
        const rcExec = api.cuGraphExecDestroy(exec);
        check(api.cuGraphDestroy(graph), "cuGraphDestroy");
        check(rcExec, "cuGraphExecDestroy");
      },
    );
  }

  /**
   * Captures the work `fn` queues on `stream` (global capture mode: while it runs, calls that would
   * synchronize the device, such as allocations or synchronous copies, fail) and instantiates it.
   * `fn` must be synchronous; if it throws, the capture is ended and discarded and the error rethrown.
   */
  static capture(stream: Stream, fn: () => void): Graph {
    requireStream("Graph.capture", "stream", stream);
    if (typeof fn !== "function") throw new ArgumentError("Graph.capture", "fn", "a function", describeValue(fn));
    const api = driverOn(stream.deviceOrdinal);
    check(api.cuStreamBeginCapture_v2(stream.handle, CUflags.STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture_v2");
    let failure: { error: unknown } | undefined;
    capturesInProgress++;
    try {
      const result: unknown = fn();
      if (result !== null && typeof result === "object" && typeof (result as { then?: unknown }).then === "function") {
        throw new ArgumentError("Graph.capture", "fn", "a synchronous function", "a function returning a Promise");
      }
    } catch (error) {
      failure = { error };
    } finally {
      capturesInProgress--;
    }
    const graph = new BigUint64Array(1);
    const rcEnd = api.cuStreamEndCapture(stream.handle, graph);
    if (failure) {
      if (graph[0] !== 0n) api.cuGraphDestroy(graph[0]);
      throw failure.error;
    }
    check(rcEnd, "cuStreamEndCapture");
    const exec = new BigUint64Array(1);
    const rcInst = api.cuGraphInstantiateWithFlags(exec, graph[0], 0);
    if (rcInst !== 0) api.cuGraphDestroy(graph[0]);
    check(rcInst, "cuGraphInstantiateWithFlags");
    return new Graph(graph[0], exec[0], stream.deviceOrdinal);
  }

  get disposed(): boolean {
    return this.#state.disposed;
  }

  /** Queues one replay of the graph on `stream`. */
  launch(stream: Stream): void {
    requireStream("Graph.launch", "stream", stream);
    this.#state.assertLive("Graph.launch");
    check(driverOn(this.deviceOrdinal).cuGraphLaunch(this.#exec, stream.handle), "cuGraphLaunch");
  }

  /** Destroys the executable graph and the graph; safe to call twice. Wait for replays first. */
  dispose(): void {
    this.#state.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
