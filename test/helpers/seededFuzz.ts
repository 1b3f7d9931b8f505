import assert from "node:assert/strict";

/** Where a fuzz test reads its case count and its one-seed replay, and where its seeds start. */
export interface FuzzSeedOptions {
  /** Env vars that set the number of cases; the first one set wins. */
  casesEnv: readonly string[];
  defaultCases: number;
  /** The env var that names one seed to run alone. */
  seedEnv: string;
  /** Each fuzz test starts its seeds elsewhere, so one seed names one case of one test. */
  firstSeed: number;
}

/** The seeds of one run: only the one `seedEnv` names, else the case count's consecutive seeds from firstSeed. */
export function fuzzSeeds(o: FuzzSeedOptions): number[] {
  const only = process.env[o.seedEnv];
  if (only !== undefined) return [Number(only)];
  const cases = Number(o.casesEnv.map((v) => process.env[v]).find((v) => v !== undefined) ?? String(o.defaultCases));
  return Array.from({ length: cases }, (_, n) => o.firstSeed + n);
}

/** How a fuzz test makes, names and checks the case of a seed. */
export interface FuzzCaseRunner<F> {
  /** The case of a seed; it must depend on nothing else, so that the seed alone replays it. */
  draw(seed: number): F;
  /** Every option of the case, for the failure report. */
  describe(f: F): string;
  /** Throws on a mismatch. */
  run(f: F): void;
}

/**
 * Draws and runs each seed's case, going on past failures so one run shows how widespread a bug is.
 * Each failure is one line that names the seed, the env assignment that reruns that case alone and
 * every option of the case: `seed S (rerun: VAR=S) <describe>: <message>`.
 */
export function runFuzzCases<F>(seeds: readonly number[], seedEnv: string, runner: FuzzCaseRunner<F>): { failures: string[]; seconds: number } {
  const failures: string[] = [];
  const t0 = Date.now();
  for (const seed of seeds) {
    const f = runner.draw(seed);
    try {
      runner.run(f);
    } catch (e) {
      failures.push(`seed ${seed} (rerun: ${seedEnv}=${seed}) ${runner.describe(f)}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  return { failures, seconds: (Date.now() - t0) / 1000 };
}

/** Fails with the count and the first ten failure lines (a systematic bug fails most cases alike). */
export function assertFuzzPassed(failures: readonly string[], total: number, what: string): void {
  assert.equal(failures.length, 0, `${failures.length} of ${total} ${what} cases failed:\n${failures.slice(0, 10).join("\n")}`);
}

/** Cases counted by one of their options, for a run's summary line. */
export class Tally<K extends string | number> {
  private readonly counts = new Map<K, number>();

  add(key: K): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** `<prefix><key> <count>` by ascending key (numbers as numbers), comma-separated. */
  format(prefix = ""): string {
    const byKey = (x: K, y: K) => (typeof x === "number" && typeof y === "number" ? x - y : String(x) < String(y) ? -1 : String(x) > String(y) ? 1 : 0);
    return [...this.counts].sort((x, y) => byKey(x[0], y[0])).map(([k, n]) => `${prefix}${k} ${n}`).join(", ");
  }
}
