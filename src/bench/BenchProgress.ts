import { performance } from "node:perf_hooks";
import cliProgress from "cli-progress";

/** How progress shows: a bar on a terminal, a line now and then in a log, or nothing (tests). */
export type ProgressMode = "bar" | "lines" | "off";

/** The mode for a command: off when asked, a bar when stderr is a terminal, else occasional lines. */
export function progressMode(enabled: boolean): ProgressMode {
  if (!enabled) return "off";
  return process.stderr.isTTY === true ? "bar" : "lines";
}

/** Milliseconds between two progress lines in "lines" mode. */
const LINE_INTERVAL_MS = 15_000;

/**
 * Progress of a long GPU run: a cli-progress bar on stderr when it is a terminal; otherwise, in
 * "lines" mode, one line every 15 s through `log` (so a CI log or a remote run shows it is alive);
 * in "off" mode nothing.
 */
export class BenchProgress {
  readonly #bar: cliProgress.SingleBar | undefined;
  readonly #log: ((line: string) => void) | undefined;
  #value = 0;
  #total = 1;
  #label = "";
  #lastLine = 0;

  constructor(
    mode: ProgressMode,
    log?: (line: string) => void,
    /** Least time between two lines in "lines" mode. @default 15000 */
    readonly lineIntervalMs = LINE_INTERVAL_MS,
  ) {
    this.#bar =
      mode === "bar"
        ? new cliProgress.SingleBar(
            { stream: process.stderr, format: " {bar} {percentage}% | {label}", clearOnComplete: true, hideCursor: true, etaBuffer: 50 },
            cliProgress.Presets.shades_classic,
          )
        : undefined;
    this.#log = mode === "lines" ? log : undefined;
  }

  start(total: number, label: string): void {
    this.#value = 0;
    this.#total = Math.max(1, total);
    this.#label = label;
    this.#lastLine = performance.now();
    this.#bar?.start(this.#total, 0, { label });
  }

  /** Advances by `steps`, optionally with a new label. */
  tick(steps = 1, label?: string): void {
    this.#value += steps;
    if (label !== undefined) this.#label = label;
    this.#bar?.update(this.#value, label === undefined ? undefined : { label });
    this.maybeLine();
  }

  label(label: string): void {
    this.#label = label;
    this.#bar?.update(this.#value, { label });
    this.maybeLine();
  }

  stop(): void {
    this.#bar?.stop();
  }

  private maybeLine(): void {
    if (this.#log === undefined) return;
    const now = performance.now();
    if (now - this.#lastLine < this.lineIntervalMs) return;
    this.#lastLine = now;
    this.#log(`  … ${Math.min(100, Math.round((100 * this.#value) / this.#total))}% ${this.#label}\n`);
  }
}
