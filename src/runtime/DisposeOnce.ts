/**
 * The disposal state of one device object: releases the native handle exactly once, however often
 * `dispose()` is called, and turns later use into a clear Error instead of a driver fault on a
 * dangling handle.
 */
export class DisposeOnce {
  #disposed = false;

  constructor(
    /** Describes the object for messages, e.g. "DeviceBuffer (1024 bytes on cuda:0)". */
    private readonly describe: () => string,
    private readonly release: () => void,
  ) {}

  get disposed(): boolean {
    return this.#disposed;
  }

  /** Throws if disposed; `operation` names the method, e.g. "DeviceBuffer.copyToHost". */
  assertLive(operation: string): void {
    if (this.#disposed) throw new Error(`${operation}(): ${this.describe()} was already disposed`);
  }

  /**
   * Releases the handle the first time; later calls do nothing. The object counts as disposed even
   * if the release throws, so a failed free is reported once and never retried on a stale handle.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.release();
  }
}
