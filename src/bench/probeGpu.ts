import { config } from "../config.js";
import { NoGpuError } from "../errors/NoGpuError.js";
import { Device } from "../runtime/Device.js";

/** Whether the kernels can run here: a Hopper device, or the reason there is none. */
export type GpuProbe = { ok: true; device: Device } | { ok: false; reason: string };

/**
 * Opens device `ordinal` if the driver loads, the device exists and it is a Hopper GPU (compute
 * capability 9.0, the only target of the sm_90a kernels); otherwise says why not, in words that
 * end up after "no GPU: " in the commands' messages. Never throws.
 * @default ordinal config.deviceOrdinal (FLASHMLA_DEVICE)
 */
export function probeGpu(ordinal: number = config.deviceOrdinal): GpuProbe {
  let device: Device;
  try {
    device = Device.get(ordinal);
  } catch (e) {
    if (e instanceof NoGpuError) return { ok: false, reason: e.reason };
    return { ok: false, reason: e instanceof Error ? e.message : String(e) };
  }
  if (!device.isHopper) {
    const { major, minor } = device.computeCapability;
    return {
      ok: false,
      reason: `${device.name} (compute capability ${major}.${minor}) is not a Hopper GPU; the kernels are built for sm_90a (H100, H200, H800)`,
    };
  }
  return { ok: true, device };
}
