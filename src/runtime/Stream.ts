// CONTRACT STUB: the runtime helper replaces the bodies; the public surface below is fixed.
/** A CUDA stream (cuStreamCreate, non-blocking). */
export class Stream {
  private constructor(readonly handle: bigint) {}
  static create(deviceOrdinal = 0): Stream { void deviceOrdinal; throw new Error("not implemented"); }
  synchronize(): void { throw new Error("not implemented"); }
  dispose(): void {}
  [Symbol.dispose](): void { this.dispose(); }
}
