import assert from "node:assert/strict";
import { test } from "node:test";
import { ArgumentError } from "../../../../src/errors/ArgumentError.js";
import { mlaDecodeReference, type MlaDecodeReferenceArgs } from "../../../../src/mla/reference/mlaDecodeReference.js";

/** A wrong argument: what is wrong, the arguments, and the message after "mlaDecodeReference(): ". */
export type RejectionCase = [what: string, make: () => MlaDecodeReferenceArgs, message: string];

/** One test per case: mlaDecodeReference(make()) throws an ArgumentError with exactly that message. */
export function testRejections(cases: readonly RejectionCase[]): void {
  for (const [what, make, message] of cases) {
    test(`mlaDecodeReference() rejects ${what}`, () => {
      const args = make();
      assert.throws(() => mlaDecodeReference(args), (err: unknown) => {
        assert.ok(err instanceof ArgumentError, `an ArgumentError, got ${String(err)}`);
        assert.equal(err.message, `mlaDecodeReference(): ${message}`);
        return true;
      });
    });
  }
}
