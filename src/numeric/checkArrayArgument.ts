import { ArgumentError, describeValue } from "../errors/ArgumentError.js";

/** Numbers to convert: a Float32Array, a Float64Array or a plain array of numbers. */
export type FloatValues = Float32Array | Float64Array | readonly number[];

const FLOAT_VALUES = "a Float32Array, a Float64Array or an array of numbers";

/**
 * Checks that `values` is {@link FloatValues}. Integer typed arrays are refused: a Uint16Array here is
 * almost always bf16 or fp16 bits handed to the wrong converter, and would be rounded as integers.
 * A plain array is scanned once, so a string or undefined inside it is named rather than read as NaN.
 */
export function checkFloatValues(fn: string, argument: string, values: unknown): asserts values is FloatValues {
  if (values instanceof Float32Array || values instanceof Float64Array) return;
  if (!Array.isArray(values)) throw new ArgumentError(fn, argument, FLOAT_VALUES, describeValue(values));
  for (let i = 0; i < values.length; i++) {
    if (typeof values[i] !== "number") throw new ArgumentError(fn, argument, FLOAT_VALUES, `${describeValue(values[i])} at index ${i}`);
  }
}

/**
 * Checks that `array` is an instance of `type` (a Buffer passes as a Uint8Array). `what` says what its
 * elements mean, e.g. "bf16 bit patterns".
 */
export function checkTypedArray<T extends ArrayBufferView>(fn: string, argument: string, array: unknown, type: abstract new (...args: never[]) => T, what: string): asserts array is T {
  if (!(array instanceof type)) throw new ArgumentError(fn, argument, `a ${type.name} of ${what}`, describeValue(array));
}
