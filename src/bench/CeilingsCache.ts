import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TimingStats } from "./timingStats.js";

/** The ceilings one GPU reached with our own kernels (`flashmla ceilings`). */
export interface CeilingsRecord {
  /** Device name as the driver reports it, e.g. "NVIDIA H200". */
  gpuName: string;
  /** Kernel driver version, e.g. "580.159.04". */
  driverVersion: string;
  /** ISO time of the measurement. */
  measuredAt: string;
  /** Device-to-device copy, bytes read plus written, GB/s (median run). */
  copyGbPerS: number;
  /** Read-only stream, GB/s (median run). */
  readGbPerS: number;
  /** bf16 wgmma loop on every SM, TFLOPS (median run). */
  gemmTflops: number;
  /** How the figures were obtained: sizes and the timing statistics of each kernel, in µs. */
  detail: {
    copyBytes: number;
    readBytes: number;
    wgmmaFlop: number;
    copyUs: TimingStats;
    readUs: TimingStats;
    wgmmaUs: TimingStats;
    /** The driver's own device-to-device copy (cuMemcpyDtoDAsync) of the same buffer, for comparison, GB/s. */
    driverCopyGbPerS?: number;
    /** SM clock while measuring, where nvidia-smi reported one. */
    smClockMhz?: number;
  };
}

interface CacheFile {
  version: 1;
  entries: Record<string, CeilingsRecord>;
}

/**
 * Where measured ceilings are kept: `$FLASHMLA_CACHE_DIR/ceilings.json`, else
 * `$XDG_CACHE_HOME/flashmla-ts/ceilings.json`, else `~/.cache/flashmla-ts/ceilings.json`.
 */
export function ceilingsCacheFile(env: NodeJS.ProcessEnv = process.env): string {
  const dir = env.FLASHMLA_CACHE_DIR ?? path.join(env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "flashmla-ts");
  return path.join(dir, "ceilings.json");
}

/**
 * Measured ceilings by GPU name and driver version, in a small JSON file. A missing or damaged file
 * reads as empty (and is replaced on the next `put`): the cache only saves a measurement.
 */
export class CeilingsCache {
  constructor(
    /** @default ceilingsCacheFile() */
    readonly file: string = ceilingsCacheFile(),
  ) {}

  /** The record for this GPU and driver, or undefined. */
  get(gpuName: string, driverVersion: string): CeilingsRecord | undefined {
    const rec = this.read().entries[cacheKey(gpuName, driverVersion)];
    return rec !== undefined && isRecord(rec) ? rec : undefined;
  }

  /** Every record in the file. */
  all(): CeilingsRecord[] {
    return Object.values(this.read().entries).filter(isRecord);
  }

  /** Stores `record` under its GPU name and driver, replacing an older one. */
  put(record: CeilingsRecord): void {
    const data = this.read();
    data.entries[cacheKey(record.gpuName, record.driverVersion)] = record;
    mkdirSync(path.dirname(this.file), { recursive: true });
    // Write then rename, so a reader never sees half a file.
    const tmp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(data, null, 2)}\n`);
    renameSync(tmp, this.file);
  }

  private read(): CacheFile {
    try {
      const parsed = JSON.parse(readFileSync(this.file, "utf8")) as Partial<CacheFile> | null;
      if (parsed?.version === 1 && parsed.entries !== null && typeof parsed.entries === "object") {
        return { version: 1, entries: { ...parsed.entries } };
      }
    } catch {
      // Missing or unreadable: start afresh.
    }
    return { version: 1, entries: {} };
  }
}

function cacheKey(gpuName: string, driverVersion: string): string {
  return `${gpuName}|${driverVersion}`;
}

function isRecord(r: unknown): r is CeilingsRecord {
  const x = r as Partial<CeilingsRecord> | null;
  const positive = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v > 0;
  return x !== null && typeof x === "object" && typeof x.gpuName === "string" && positive(x.copyGbPerS) && positive(x.readGbPerS) && positive(x.gemmTflops);
}
