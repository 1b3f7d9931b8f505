/** An NCCL version: `code` as ncclGetVersion gives it (NCCL_VERSION_CODE), and its parts. */
export interface NcclVersion {
  /** e.g. 22809 for 2.28.9; compare codes with {@link ncclVersionCode}. */
  readonly code: number;
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
}

/**
 * nccl.h's NCCL_VERSION(major, minor, patch): major·10000 + minor·100 + patch since 2.9, and
 * major·1000 + minor·100 + patch for 2.8 and older.
 */
export function ncclVersionCode(major: number, minor: number, patch: number): number {
  return major <= 2 && minor <= 8 ? major * 1000 + minor * 100 + patch : major * 10000 + minor * 100 + patch;
}

/**
 * Splits a version code into its parts, reading either encoding (codes below 10000 are the old one).
 * @example decodeNcclVersion(22809) // { code: 22809, major: 2, minor: 28, patch: 9 }
 */
export function decodeNcclVersion(code: number): NcclVersion {
  const scale = code >= 10000 ? 10000 : 1000;
  return Object.freeze({ code, major: Math.floor(code / scale), minor: Math.floor((code % scale) / 100), patch: code % 100 });
}
