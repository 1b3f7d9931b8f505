import { readFileSync } from "node:fs";
import path from "node:path";
import { InvalidArgumentError } from "commander";
import { config } from "../config.js";

/** commander argParser: a decimal integer >= min (commander prints the message and exits 2). */
export function intAtLeast(min: number): (value: string) => number {
  return (value: string) => {
    const n = /^\d+$/.test(value.trim()) ? Number(value) : NaN;
    if (!Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`expected an integer >= ${min}.`);
    return n;
  };
}

/** commander argParser: a decimal integer >= 0 (seeds, device ordinals). */
export function nonNegativeInteger(value: string): number {
  const n = /^\d+$/.test(value.trim()) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n)) throw new InvalidArgumentError("expected a non-negative integer.");
  return n;
}

/** A number with exactly `digits` decimals, no grouping: the tables' format. */
export function fmt(x: number, digits: number): string {
  return x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits, useGrouping: false });
}

/** The package's version from its package.json, or "unknown". */
export function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(path.join(config.packageRoot, "package.json"), "utf8")) as { version?: string };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
}
