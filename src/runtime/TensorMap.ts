import { ArgumentError } from "../errors/ArgumentError.js";
import { check } from "../driver/check.js";
import {
  CU_TENSOR_MAP_ALIGNMENT,
  CU_TENSOR_MAP_SIZE_BYTES,
  CUtensorMapDataType,
  CUtensorMapFloatOOBfill,
  CUtensorMapInterleave,
  CUtensorMapL2promotion,
  CUtensorMapSwizzle,
} from "../driver/cudaEnums.js";
import { loadKoffi } from "../driver/loadKoffi.js";
import type { DType } from "./dtype.js";
import { driverOn } from "./Device.js";

/** Element type of a tensor map: a CUtensorMapDataType name, or one of our DTypes. */
export type TensorMapDataType = keyof typeof CUtensorMapDataType | DType;

/** Arguments of `TensorMap.encodeTiled` (the parameters of cuTensorMapEncodeTiled). */
export interface TiledTensorMapOptions {
  dataType: TensorMapDataType;
  /** Device address of element [0, ..., 0]; 16-byte aligned (32 with interleave "32B"). */
  globalAddress: bigint;
  /** Extent of each dimension, innermost first (rank 1..5). */
  globalDim: readonly (number | bigint)[];
  /** Byte stride of dimensions 1..rank-1 (rank-1 values), each a multiple of 16. */
  globalStrides: readonly (number | bigint)[];
  /** Box (tile) extent per dimension, 1..256; the inner one times the element size a multiple of 16 bytes. */
  boxDim: readonly number[];
  /** Traversal step per dimension, 1..8. @default all 1 */
  elementStrides?: readonly number[];
  /** @default "NONE" */
  interleave?: keyof typeof CUtensorMapInterleave;
  /** Shared-memory swizzle; the inner box must fit in the swizzle span. @default "NONE" */
  swizzle?: keyof typeof CUtensorMapSwizzle;
  /** @default "NONE" */
  l2Promotion?: keyof typeof CUtensorMapL2promotion;
  /** "NAN_REQUEST_ZERO_FMA" fills out-of-bounds float elements with NaN. @default "NONE" */
  oobFill?: keyof typeof CUtensorMapFloatOOBfill;
  /** Device whose context encodes the map (the one holding `globalAddress`). @default 0 */
  deviceOrdinal?: number;
}

/** The checked, numeric form of TiledTensorMapOptions, as the driver takes it. */
export interface TiledTensorMapArgs {
  dataType: number;
  elementSizeBytes: number;
  rank: number;
  globalAddress: bigint;
  globalDim: BigUint64Array;
  globalStrides: BigUint64Array;
  boxDim: Uint32Array;
  elementStrides: Uint32Array;
  interleave: number;
  swizzle: number;
  l2Promotion: number;
  oobFill: number;
}

const FN = "TensorMap.encodeTiled";

const DTYPE_TO_MAP: Record<DType, keyof typeof CUtensorMapDataType> = {
  bf16: "BFLOAT16",
  fp16: "FLOAT16",
  fp8_e4m3: "UINT8",
  u8: "UINT8",
  f32: "FLOAT32",
  i32: "INT32",
};

// The maps encoded so far, by their arguments, most recently used last. A decode step asks for the same
// maps (the K cache's, Q's) in every layer's call, and encoding one (cuTensorMapEncodeTiled through koffi,
// with an aligned buffer allocated and freed around it) was a large share of a call's host time. A map is
// a pure function of these arguments, so a kept one is the same 128 bytes the driver would write again.
const encoded = new Map<string, Uint8Array>();
const ENCODED_KEPT = 256;

// The options as a key, or undefined where a field is not of the plain form the key can spell exactly
// (those are validated and encoded every time). Built from the options as given, before validation: a
// key is only ever stored after its options passed validateTiled, so a hit needs no second check.
function encodedKey(o: TiledTensorMapOptions): string | undefined {
  if (o === null || typeof o !== "object" || typeof o.globalAddress !== "bigint") return undefined;
  const ordinal = o.deviceOrdinal ?? 0;
  if (typeof ordinal !== "number" || typeof o.dataType !== "string") return undefined;
  const parts: unknown[] = [ordinal, o.dataType, o.globalAddress, o.interleave ?? "NONE", o.swizzle ?? "NONE", o.l2Promotion ?? "NONE", o.oobFill ?? "NONE"];
  if (!parts.slice(3).every((v) => typeof v === "string")) return undefined;
  for (const list of [o.globalDim, o.globalStrides, o.boxDim, o.elementStrides ?? []]) {
    if (!Array.isArray(list) || !list.every((v) => typeof v === "number" || typeof v === "bigint")) return undefined;
    parts.push(list.join(","));
  }
  return parts.join(";");
}

/** TMA tensor maps (CUtensorMap): 128 opaque bytes a kernel receives by value, e.g. inside its Params. */
export class TensorMap {
  private constructor() {}

  /**
   * Encodes a tiled tensor map with cuTensorMapEncodeTiled and returns its 128 bytes, ready to be
   * copied into a kernel's parameter struct at a 64-byte aligned offset. Arguments are checked
   * first against the driver's documented rules, so a mistake names the field. The last 256 maps are
   * kept by their arguments: asking again returns a copy of the kept bytes without calling the driver.
   */
  static encodeTiled(options: TiledTensorMapOptions): Uint8Array {
    const key = encodedKey(options);
    const hit = key === undefined ? undefined : encoded.get(key);
    if (hit !== undefined) {
      encoded.delete(key!);
      encoded.set(key!, hit);
      return hit.slice();
    }
    const a = TensorMap.validateTiled(options);
    const map = TensorMap.encodeNow(options.deviceOrdinal ?? 0, a);
    if (key !== undefined) {
      encoded.set(key, map);
      if (encoded.size > ENCODED_KEPT) encoded.delete(encoded.keys().next().value!);
    }
    return map.slice();
  }

  private static encodeNow(ordinal: number, a: TiledTensorMapArgs): Uint8Array {
    const api = driverOn(ordinal);
    const koffi = loadKoffi();
    // The driver writes the map through a pointer that must be 64-byte aligned; malloc gives 16.
    const raw = koffi.alloc("uint8_t", CU_TENSOR_MAP_SIZE_BYTES + CU_TENSOR_MAP_ALIGNMENT) as bigint;
    try {
      const misalignment = Number(raw % BigInt(CU_TENSOR_MAP_ALIGNMENT));
      const skip = misalignment === 0 ? 0 : CU_TENSOR_MAP_ALIGNMENT - misalignment;
      const map = raw + BigInt(skip);
      check(
        api.cuTensorMapEncodeTiled(
          map,
          a.dataType,
          a.rank,
          a.globalAddress,
          a.globalDim,
          a.globalStrides.length > 0 ? a.globalStrides : new BigUint64Array(1),
          a.boxDim,
          a.elementStrides,
          a.interleave,
          a.swizzle,
          a.l2Promotion,
          a.oobFill,
        ),
        "cuTensorMapEncodeTiled",
      );
      return new Uint8Array(koffi.view(raw, CU_TENSOR_MAP_SIZE_BYTES + CU_TENSOR_MAP_ALIGNMENT), skip, CU_TENSOR_MAP_SIZE_BYTES).slice();
    } finally {
      koffi.free(raw);
    }
  }

  /**
   * Checks `options` against cuTensorMapEncodeTiled's rules (cuda.h 13.0) and converts them to the
   * driver's types. Needs no GPU.
   * @throws ArgumentError naming the first field that breaks a rule.
   */
  static validateTiled(options: TiledTensorMapOptions): TiledTensorMapArgs {
    if (options === null || typeof options !== "object") throw new ArgumentError(FN, "options", "an options object", String(options));
    const typeName = typeof options.dataType === "string" && Object.hasOwn(DTYPE_TO_MAP, options.dataType) ? DTYPE_TO_MAP[options.dataType as DType] : options.dataType;
    const type = Object.hasOwn(CUtensorMapDataType, typeName) ? CUtensorMapDataType[typeName as keyof typeof CUtensorMapDataType] : undefined;
    if (!type) {
      throw new ArgumentError(FN, "dataType", `one of ${[...Object.keys(CUtensorMapDataType), ...Object.keys(DTYPE_TO_MAP)].join(", ")}`, JSON.stringify(options.dataType));
    }
    const interleaveName = options.interleave ?? "NONE";
    const interleave = enumValue("interleave", CUtensorMapInterleave, interleaveName);
    const swizzleName = options.swizzle ?? "NONE";
    const swizzle = enumValue("swizzle", CUtensorMapSwizzle, swizzleName);
    const l2Promotion = enumValue("l2Promotion", CUtensorMapL2promotion, options.l2Promotion ?? "NONE");
    const oobFill = enumValue("oobFill", CUtensorMapFloatOOBfill, options.oobFill ?? "NONE");

    const rank = Array.isArray(options.globalDim) ? options.globalDim.length : 0;
    const minRank = interleave === CUtensorMapInterleave.NONE ? 1 : 3;
    if (rank < minRank || rank > 5) {
      throw new ArgumentError(FN, "globalDim", `an array of ${minRank}..5 extents (the rank)${minRank === 3 ? " with interleave" : ""}`, JSON.stringify(options.globalDim, bigintJson));
    }

    const addressAlign = interleave === CUtensorMapInterleave["32B"] ? 32n : 16n;
    if (typeof options.globalAddress !== "bigint" || options.globalAddress <= 0n || options.globalAddress % addressAlign !== 0n) {
      throw new ArgumentError(FN, "globalAddress", `a device address (bigint) aligned to ${addressAlign} bytes`, String(options.globalAddress));
    }

    const globalDim = new BigUint64Array(rank);
    options.globalDim.forEach((d, i) => {
      const v = toBigInt(d);
      if (v === undefined || v < 1n || v > 1n << 32n) {
        throw new ArgumentError(FN, `globalDim[${i}]`, "an integer in [1, 2^32]", String(d));
      }
      globalDim[i] = v;
    });

    if (!Array.isArray(options.globalStrides) || options.globalStrides.length !== rank - 1) {
      throw new ArgumentError(FN, "globalStrides", `${rank - 1} byte strides (rank - 1; dimension 0 is contiguous)`, JSON.stringify(options.globalStrides, bigintJson));
    }
    const strideAlign = interleave === CUtensorMapInterleave["32B"] ? 32n : 16n;
    const globalStrides = new BigUint64Array(rank - 1);
    options.globalStrides.forEach((s, i) => {
      const v = toBigInt(s);
      if (v === undefined || v <= 0n || v % strideAlign !== 0n || v >= 1n << 40n) {
        throw new ArgumentError(FN, `globalStrides[${i}]`, `a positive multiple of ${strideAlign} bytes below 2^40`, String(s));
      }
      globalStrides[i] = v;
    });

    if (!Array.isArray(options.boxDim) || options.boxDim.length !== rank) {
      throw new ArgumentError(FN, "boxDim", `${rank} box extents (one per dimension)`, JSON.stringify(options.boxDim));
    }
    const boxDim = new Uint32Array(rank);
    options.boxDim.forEach((b, i) => {
      if (!Number.isInteger(b) || b < 1 || b > 256) throw new ArgumentError(FN, `boxDim[${i}]`, "an integer in [1, 256]", String(b));
      boxDim[i] = b;
    });
    const innerBoxBytes = boxDim[0] * type.sizeBytes;
    if (interleave === CUtensorMapInterleave.NONE) {
      if (innerBoxBytes % 16 !== 0) {
        throw new ArgumentError(FN, "boxDim[0]", `an inner box of a multiple of 16 bytes (${type.sizeBytes}-byte elements)`, `${boxDim[0]} (${innerBoxBytes} bytes)`);
      }
      const span = CUtensorMapSwizzle[swizzleName].spanBytes;
      if (span > 0 && innerBoxBytes > span) {
        throw new ArgumentError(FN, "boxDim[0]", `an inner box of at most ${span} bytes with swizzle ${swizzleName}`, `${boxDim[0]} (${innerBoxBytes} bytes)`);
      }
    }
    if (interleave === CUtensorMapInterleave["32B"] && swizzle !== CUtensorMapSwizzle["32B"].value) {
      throw new ArgumentError(FN, "swizzle", 'swizzle "32B" with interleave "32B"', JSON.stringify(swizzleName));
    }

    const elementStridesIn = options.elementStrides ?? new Array<number>(rank).fill(1);
    if (!Array.isArray(elementStridesIn) || elementStridesIn.length !== rank) {
      throw new ArgumentError(FN, "elementStrides", `${rank} traversal strides`, JSON.stringify(elementStridesIn));
    }
    const elementStrides = new Uint32Array(rank);
    elementStridesIn.forEach((e, i) => {
      if (!Number.isInteger(e) || e < 1 || e > 8) throw new ArgumentError(FN, `elementStrides[${i}]`, "an integer in [1, 8]", String(e));
      elementStrides[i] = e;
    });

    if (oobFill !== CUtensorMapFloatOOBfill.NONE && !type.float) {
      throw new ArgumentError(FN, "oobFill", `"NONE" for the integer type ${String(typeName)}`, JSON.stringify(options.oobFill));
    }

    return {
      dataType: type.value,
      elementSizeBytes: type.sizeBytes,
      rank,
      globalAddress: options.globalAddress,
      globalDim,
      globalStrides,
      boxDim,
      elementStrides,
      interleave,
      swizzle,
      l2Promotion,
      oobFill,
    };
  }
}

function enumValue(argument: string, table: Record<string, number | { value: number }>, name: string): number {
  if (typeof name !== "string" || !Object.hasOwn(table, name)) {
    throw new ArgumentError(FN, argument, `one of ${Object.keys(table).map((k) => JSON.stringify(k)).join(", ")}`, JSON.stringify(name));
  }
  const entry = table[name];
  return typeof entry === "number" ? entry : entry.value;
}

function toBigInt(v: number | bigint): bigint | undefined {
  if (typeof v === "bigint") return v;
  return Number.isSafeInteger(v) ? BigInt(v) : undefined;
}

function bigintJson(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? `${value}n` : value;
}
