/**
 * A public function was given an argument it cannot accept. The message names the function,
 * the argument, what was expected and what was given, e.g.
 * `flashMlaWithKvcache(): argument 'q': expected dtype bf16 or fp16, got f32`.
 */
export class ArgumentError extends TypeError {
  override readonly name = "ArgumentError";
  constructor(
    readonly fn: string,
    readonly argument: string,
    readonly expected: string,
    readonly got: string,
  ) {
    super(`${fn}(): argument '${argument}': expected ${expected}, got ${got}`);
  }
}

/** Formats a shape for error messages: [2, 3, 576]. */
export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

/** A value as an error message names it: its class for objects, else its type and value ("number NaN"). */
export function describeValue(v: unknown): string {
  if (v === undefined) return "undefined";
  if (v === null) return "null";
  if (typeof v === "object") return (v as object).constructor?.name ?? "object";
  if (typeof v === "function") return `function ${v.name || "(anonymous)"}`;
  return `${typeof v} ${String(v)}`;
}

/**
 * An options argument: undefined becomes `{}`; anything but a plain object (null, a number, an array)
 * is refused, so that reading a field of it cannot throw a bare TypeError.
 */
export function optionsObject<T extends object>(fn: string, argument: string, v: T | undefined): Partial<T> {
  if (v === undefined) return {};
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new ArgumentError(fn, argument, "an options object or undefined", describeValue(v));
  return v;
}
