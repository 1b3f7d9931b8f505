import cliProgress from "cli-progress";

/**
 * A progress bar on stderr for long GPU runs (cli-progress), drawn only when stderr is a terminal;
 * otherwise every method does nothing, so piped output and tests stay clean.
 */
export class BenchProgress {
  readonly #bar: cliProgress.SingleBar | undefined;
  #value = 0;

  constructor(enabled: boolean = process.stderr.isTTY === true) {
    this.#bar = enabled
      ? new cliProgress.SingleBar(
          { stream: process.stderr, format: " {bar} {percentage}% | {label}", clearOnComplete: true, hideCursor: true, etaBuffer: 50 },
          cliProgress.Presets.shades_classic,
        )
      : undefined;
  }

  start(total: number, label: string): void {
    this.#value = 0;
    this.#bar?.start(Math.max(1, total), 0, { label });
  }

  /** Raises the total, e.g. once the number of steps of a stage is known. */
  setTotal(total: number): void {
    this.#bar?.setTotal(Math.max(1, total));
  }

  /** Advances by `steps`, optionally with a new label. */
  tick(steps = 1, label?: string): void {
    this.#value += steps;
    this.#bar?.update(this.#value, label === undefined ? undefined : { label });
  }

  label(label: string): void {
    this.#bar?.update(this.#value, { label });
  }

  stop(): void {
    this.#bar?.stop();
  }
}
