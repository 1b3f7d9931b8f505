/**
 * The bits of nvml.h's `nvmlClocksEventReasons` mask (formerly `nvmlClocksThrottleReasons`, same
 * values), each with the short name the benchmark prints. Several can be set at once.
 */
export const nvmlClockEventReasons = [
  { bit: 0x1n, name: "gpu-idle" },
  { bit: 0x2n, name: "applications-clocks" },
  { bit: 0x4n, name: "sw-power-cap" },
  { bit: 0x8n, name: "hw-slowdown" },
  { bit: 0x10n, name: "sync-boost" },
  { bit: 0x20n, name: "sw-thermal" },
  { bit: 0x40n, name: "hw-thermal" },
  { bit: 0x80n, name: "hw-power-brake" },
  { bit: 0x100n, name: "display-clocks" },
] as const;

/**
 * The names of the reasons set in an NVML clock-event mask, lowest bit first; bits nvml.h added
 * after this table read as hex ("0x400"), so no reason is silently dropped. 0n gives [].
 *
 * @example clockReasonNames(0x84n) // ["sw-power-cap", "hw-power-brake"]
 */
export function clockReasonNames(mask: bigint): string[] {
  const names: string[] = [];
  let rest = mask;
  for (const { bit, name } of nvmlClockEventReasons) {
    if ((mask & bit) !== 0n) names.push(name);
    rest &= ~bit;
  }
  for (let bit = 1n; rest !== 0n; bit <<= 1n) {
    if ((rest & bit) === 0n) continue;
    names.push(`0x${bit.toString(16)}`);
    rest &= ~bit;
  }
  return names;
}
