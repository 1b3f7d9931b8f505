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
