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
 * A value for an error's `got` where numbers read best bare ("got -16"): numbers, booleans, null and
 * undefined as themselves, an array element by element, anything else as {@link describeValue}. Never
 * throws (JSON.stringify would on a bigint, a template string on a symbol).
 */
export function formatGot(v: unknown): string {
  if (v === null || v === undefined || typeof v === "number" || typeof v === "boolean") return String(v);
  if (Array.isArray(v)) return `[${v.map(formatGot).join(",")}]`;
  return describeValue(v);
}

/**
 * An options argument: undefined becomes `{}`; anything but a plain object (null, a number, an array, a
 * typed array, a class instance such as a Stream passed one position too early) is refused, so that
 * reading a field of it cannot throw a bare TypeError or read a wrong object's fields.
 */
export function optionsObject<T extends object>(fn: string, argument: string, v: T | undefined): Partial<T> {
  if (v === undefined) return {};
  const proto: unknown = v !== null && typeof v === "object" ? Object.getPrototypeOf(v) : undefined;
  if (proto !== Object.prototype && proto !== null) throw new ArgumentError(fn, argument, "an options object or undefined", describeValue(v));
  return v;
}
