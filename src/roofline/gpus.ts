import { ArgumentError } from "../errors/ArgumentError.js";

/** Keys of the GPUs the roofline model knows. */
export type GpuKey = "h200" | "h100" | "h800";

export const GPU_KEYS: readonly GpuKey[] = ["h200", "h100", "h800"];

/** Ceilings measured on a real machine; each one is optional because each needs its own run. */
export interface MeasuredCeilings {
  /** Dense bf16 tensor-core rate from a large GEMM, in TFLOPS. */
  gemmTflops?: number;
  /** Device-to-device copy, bytes read plus bytes written, in GB/s. */
  copyGbPerS?: number;
  /** Read-only stream, in GB/s. Decode is a read stream, so this is the bandwidth the roofline prefers. */
  readGbPerS?: number;
  /** Where the figures come from (machine, driver, date). */
  source?: string;
}

/** A clock the GPU really runs at under load, and the tensor-core rate it implies. */
export interface PracticalPeak {
  clockMhz: number;
  tflops: number;
  note: string;
}

/** One GPU model: counts, clocks, datasheet figures and whatever has been measured. */
export interface GpuSpec {
  key: GpuKey;
  name: string;
  sms: number;
  /** Highest SM clock the driver reports. */
  maxSmClockMhz: number;
  /** SM clock the datasheet's tensor peak assumes (NVIDIA quotes Hopper's 989 TFLOPS at 1830 MHz). */
  peakClockMhz: number;
  /** Dense bf16 tensor-core peak, in TFLOPS. */
  datasheetTflops: number;
  /** HBM bandwidth, in GB/s. */
  datasheetGbPerS: number;
  practical?: PracticalPeak;
  measured?: MeasuredCeilings;
}

/** One roof: a compute peak and a bandwidth, with the ridge point between them. */
export interface Ceiling {
  label: "datasheet" | "practical" | "measured";
  tflops: number;
  gbPerS: number;
  /** FLOP per byte where the two roofs meet. */
  ridge: number;
}

// 989.4 = 4096 FLOP/clk/SM × 132 SMs × 1830 MHz; NVIDIA rounds it to 989 on the datasheet.
const HOPPER_SXM_TFLOPS = 989.4;

/** The GPUs the model knows, by key. */
export const GPUS: Readonly<Record<GpuKey, GpuSpec>> = {
  h200: {
    key: "h200",
    name: "NVIDIA H200 SXM",
    sms: 132,
    maxSmClockMhz: 1980,
    peakClockMhz: 1830,
    datasheetTflops: HOPPER_SXM_TFLOPS,
    datasheetGbPerS: 4800,
    measured: {
      gemmTflops: 767,
      copyGbPerS: 4174,
      readGbPerS: 4138,
      source: "cuBLAS 8192³ bf16 GEMM and 2 GiB copy/read streams on an H200, driver 580.159.04",
    },
  },
  h100: {
    key: "h100",
    name: "NVIDIA H100 SXM",
    sms: 132,
    maxSmClockMhz: 1980,
    peakClockMhz: 1830,
    datasheetTflops: HOPPER_SXM_TFLOPS,
    datasheetGbPerS: 3350,
  },
  h800: {
    key: "h800",
    name: "NVIDIA H800 SXM",
    sms: 132,
    maxSmClockMhz: 1830,
    peakClockMhz: 1830,
    datasheetTflops: HOPPER_SXM_TFLOPS,
    datasheetGbPerS: 3350,
    // The FlashMLA authors saw their H800s throttle to about 1600 MHz under MMA load.
    practical: { clockMhz: 1600, tflops: 865, note: "throttled to ≈1600 MHz (FlashMLA deep dive)" },
  },
};

/**
 * The spec of GPU `key`, with `measured` figures (from a cache or a fresh run) laid over the
 * table's own measured ceilings.
 */
export function getGpuSpec(key: string, measured?: MeasuredCeilings): GpuSpec {
  if (!(GPU_KEYS as readonly string[]).includes(key)) {
    throw new ArgumentError("getGpuSpec", "key", `one of ${GPU_KEYS.join(", ")}`, JSON.stringify(key));
  }
  const spec = GPUS[key as GpuKey];
  if (measured === undefined) return spec;
  for (const [field, value] of Object.entries(measured)) {
    if (field !== "source" && value !== undefined && !(typeof value === "number" && value > 0 && Number.isFinite(value))) {
      throw new ArgumentError("getGpuSpec", `measured.${field}`, "a positive finite number", String(value));
    }
  }
  return { ...spec, measured: { ...spec.measured, ...dropUndefined(measured) } };
}

function dropUndefined(m: MeasuredCeilings): MeasuredCeilings {
  return Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) as MeasuredCeilings;
}

/**
 * The spec for a device name as the driver reports it ("NVIDIA H200", "NVIDIA H100 80GB HBM3"),
 * or undefined for a GPU the table does not describe. PCIe and NVL boards have other SM counts,
 * clocks and memory, and GH200 is its own product, so they are not matched.
 */
export function gpuSpecFromName(name: string): GpuSpec | undefined {
  const lower = name.trim().toLowerCase();
  if ((GPU_KEYS as readonly string[]).includes(lower)) return GPUS[lower as GpuKey];
  if (/\b(pcie|nvl)\b/i.test(name)) return undefined;
  // \b keeps "GH200" from matching "H200".
  const m = /\bh(100|200|800)\b/i.exec(name);
  return m === null ? undefined : GPUS[`h${m[1]}` as GpuKey];
}

/**
 * The roofs known for `spec`, from the most optimistic down: the datasheet, the seed's throttled
 * practical peak where there is one, and the measured ceilings where both a compute and a
 * bandwidth figure exist (a missing half falls back to the datasheet's).
 */
export function gpuCeilings(spec: GpuSpec): Ceiling[] {
  const roofs: Ceiling[] = [roof("datasheet", spec.datasheetTflops, spec.datasheetGbPerS)];
  if (spec.practical !== undefined) roofs.push(roof("practical", spec.practical.tflops, spec.datasheetGbPerS));
  const m = spec.measured;
  const measuredBw = m?.readGbPerS ?? m?.copyGbPerS;
  if (m !== undefined && (m.gemmTflops !== undefined || measuredBw !== undefined)) {
    roofs.push(roof("measured", m.gemmTflops ?? spec.datasheetTflops, measuredBw ?? spec.datasheetGbPerS));
  }
  return roofs;
}

/** The roof to quote achieved figures against: measured, else practical, else datasheet. */
export function referenceCeiling(spec: GpuSpec): Ceiling {
  const roofs = gpuCeilings(spec);
  return roofs[roofs.length - 1];
}

function roof(label: Ceiling["label"], tflops: number, gbPerS: number): Ceiling {
  return { label, tflops, gbPerS, ridge: (tflops * 1e12) / (gbPerS * 1e9) };
}

/**
 * Tensor-core FLOP per clock per SM implied by a peak: peak / clock / SMs
 * (989.4 TFLOPS / 1830 MHz / 132 = 4096 on Hopper).
 */
export function mmaFlopPerClockPerSm(spec: Pick<GpuSpec, "datasheetTflops" | "peakClockMhz" | "sms">): number {
  return (spec.datasheetTflops * 1e12) / (spec.peakClockMhz * 1e6 * spec.sms);
}
