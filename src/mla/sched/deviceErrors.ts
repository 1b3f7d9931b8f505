import { ArgumentError } from "../../errors/ArgumentError.js";
import { DEVICE_ERROR_WORDS } from "../contract/shape.js";

/** The codes of the device-side error record (params.h ERR_*). */
export const DeviceErrorCode = Object.freeze({ none: 0, negativeLength: 1, lengthPastTable: 2, blockId: 4 });

/**
 * The ArgumentError a device-side error record describes (words: code, request, position, value, limit),
 * or undefined when it holds none. Pure, so the messages are tested without a GPU.
 */
export function deviceErrorToArgumentError(words: ArrayLike<number>): ArgumentError | undefined {
  const [code, req, pos, value, limit] = [words[0], words[1], words[2], words[3], words[4]];
  const fn = "flashMlaWithKvcache";
  switch (code) {
    case DeviceErrorCode.none:
      return undefined;
    case DeviceErrorCode.negativeLength:
      return new ArgumentError(fn, "cacheSeqlens", "lengths >= 0 (that request was decoded as empty: out 0, lse +inf)", `cacheSeqlens[${req}] = ${value}`);
    case DeviceErrorCode.lengthPastTable:
      return new ArgumentError(
        fn,
        "cacheSeqlens",
        `lengths <= 64 · max_blocks_per_seq = ${limit} (the block table has no entries past that; that request was decoded as empty: out 0, lse +inf)`,
        `cacheSeqlens[${req}] = ${value}`,
      );
    case DeviceErrorCode.blockId:
      return new ArgumentError(
        fn,
        "blockTable",
        `block ids in [0, num_blocks = ${limit}) for every block a request uses (that block was read as zeros)`,
        `blockTable[${req}][${pos}] = ${value}`,
      );
    default:
      return new ArgumentError(fn, "schedMeta", "a device error record with a known code", `code ${code} (words ${Array.from({ length: DEVICE_ERROR_WORDS }, (_, i) => words[i]).join(", ")})`);
  }
}
