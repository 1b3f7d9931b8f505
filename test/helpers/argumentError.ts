import assert from "node:assert/strict";
import { ArgumentError } from "../../src/errors/ArgumentError.js";

/**
 * Asserts that `fn` throws an ArgumentError whose message is exactly `message`, and whose structured
 * fields (fn, argument, expected, got) say what the message says, so callers can branch on them.
 */
export function rejectsWithMessage(what: string, fn: () => unknown, message: string): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ArgumentError, `${what}: expected an ArgumentError, got ${String(e)}`);
    assert.equal(e.message, message, what);
    assert.ok(e.message.startsWith(`${e.fn}(): argument '${e.argument}': expected ${e.expected}, got ${e.got}`), what);
    return true;
  }, what);
}
