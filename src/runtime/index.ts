/** flashmla-ts/runtime: the CUDA runtime layer (devices, memory, streams, events, modules, kernel launch, TMA maps, graphs). */
export { Device } from "./Device.js";
export { DeviceBuffer, type DeviceCopyOptions } from "./DeviceBuffer.js";
export { Event, type EventOptions } from "./Event.js";
export { Graph } from "./Graph.js";
export { hopperSupport, type GpuIdentity, type HopperSupport } from "./hopperSupport.js";
export { Kernel, type KernelAttributes, type KernelParamInfo } from "./Kernel.js";
export { Module, type ModuleLoadOptions } from "./Module.js";
export { normalizeLaunchConfig, type Dim3, type LaunchConfig, type NormalizedLaunchConfig } from "./normalizeLaunchConfig.js";
export { kernelArgSize, packKernelArgs, type KernelArg, type PackedKernelArgs } from "./packKernelArgs.js";
export { readKernelManifest, readVerifiedCubin, type KernelManifestEntry } from "./readVerifiedCubin.js";
export { Stream } from "./Stream.js";
export { TensorMap, type TensorMapDataType, type TiledTensorMapArgs, type TiledTensorMapOptions } from "./TensorMap.js";
export { Tensor, contiguousStrides, numelOf, type DeviceName } from "./Tensor.js";
export { DTYPES, allocHostArray, dtypeSize, hostArrayMatches, type DType, type HostArray, type HostArrayOf } from "./dtype.js";
