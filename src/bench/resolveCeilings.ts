import type { Device } from "../runtime/Device.js";
import { CeilingsCache, type CeilingsRecord } from "./CeilingsCache.js";
import type { GpuEnvironment } from "./gpuEnvironment.js";
import { measureCeilings, type MeasureCeilingsOptions } from "./measureCeilings.js";

/** Options of {@link resolveCeilings}. */
export interface ResolveCeilingsOptions extends MeasureCeilingsOptions {
  /** Measure even when the cache holds a record for this GPU and driver. @default false */
  fresh?: boolean;
  /** @default new CeilingsCache() */
  cache?: CeilingsCache;
}

/**
 * This GPU's measured ceilings: from the cache when it holds them for this GPU name and driver
 * (unless `fresh`), else measured now and stored. A cache that cannot be written is not an error.
 */
export function resolveCeilings(device: Device, env: GpuEnvironment, opts: ResolveCeilingsOptions = {}): { record: CeilingsRecord; source: "this run" | "cache"; cacheError?: string } {
  const cache = opts.cache ?? new CeilingsCache();
  if (opts.fresh !== true) {
    const hit = cache.get(env.name, env.driverVersion);
    if (hit !== undefined) return { record: hit, source: "cache" };
  }
  const record = measureCeilings(device, env, opts);
  try {
    cache.put(record);
    return { record, source: "this run" };
  } catch (e) {
    return { record, source: "this run", cacheError: e instanceof Error ? e.message : String(e) };
  }
}
