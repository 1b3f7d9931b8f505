import type { Koffi } from "./loadKoffi.js";

/**
 * How each cuda.h type name used in `bindings` maps onto koffi: enums are 4-byte ints, handles are
 * pointers to opaque structs (koffi passes and returns them as bigint), CUdeviceptr is a 64-bit
 * integer. Structs passed by pointer are opaque here because we lay them out ourselves.
 */
export const driverTypeDefinitions = {
  CUresult: "int",
  CUdevice: "int",
  CUdeviceptr: "uint64_t",
  cuuint32_t: "uint32_t",
  cuuint64_t: "uint64_t",
  CUdevice_attribute: "int",
  CUfunction_attribute: "int",
  CUstreamCaptureMode: "int",
  CUtensorMapDataType: "int",
  CUtensorMapInterleave: "int",
  CUtensorMapSwizzle: "int",
  CUtensorMapL2promotion: "int",
  CUtensorMapFloatOOBfill: "int",
  CUcontext: "handle",
  CUmodule: "handle",
  CUfunction: "handle",
  CUstream: "handle",
  CUevent: "handle",
  CUgraph: "handle",
  CUgraphExec: "handle",
  CUlaunchConfig: "opaque",
  CUtensorMap: "opaque",
} as const;

const registered = new WeakSet<object>();

/** Declares the cuda.h type names with koffi (once per koffi instance; koffi's names are global). */
export function registerDriverTypes(koffi: Koffi): void {
  if (registered.has(koffi)) return;
  for (const [name, kind] of Object.entries(driverTypeDefinitions)) {
    if (kind === "handle") koffi.pointer(name, koffi.opaque());
    else if (kind === "opaque") koffi.opaque(name);
    else koffi.alias(name, kind);
  }
  registered.add(koffi);
}
