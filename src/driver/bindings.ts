/**
 * The CUDA driver functions we call, as a declarative table `symbol: [returnType, [argTypes]]`.
 *
 * Symbols are the exported names in libcuda.so.1, i.e. after cuda.h's `#define cuMemAlloc
 * cuMemAlloc_v2` renames: binding the unversioned name would silently get the old 32-bit ABI.
 * Type strings are spelled exactly as in the cuda.h prototypes (a test compares them when the header
 * is present); `registerDriverTypes()` teaches koffi each name. Groups follow cuda.h's sections.
 */
export const bindings = {
  // Error handling
  cuGetErrorName: ["CUresult", ["CUresult", "const char **"]],
  cuGetErrorString: ["CUresult", ["CUresult", "const char **"]],

  // Initialization and version management
  cuInit: ["CUresult", ["unsigned int"]],
  cuDriverGetVersion: ["CUresult", ["int *"]],

  // Device management
  cuDeviceGetCount: ["CUresult", ["int *"]],
  cuDeviceGet: ["CUresult", ["CUdevice *", "int"]],
  cuDeviceGetName: ["CUresult", ["char *", "int", "CUdevice"]],
  cuDeviceGetAttribute: ["CUresult", ["int *", "CUdevice_attribute", "CUdevice"]],
  cuDeviceTotalMem_v2: ["CUresult", ["size_t *", "CUdevice"]],
  cuDeviceGetPCIBusId: ["CUresult", ["char *", "int", "CUdevice"]],

  // Primary context management
  cuDevicePrimaryCtxRetain: ["CUresult", ["CUcontext *", "CUdevice"]],
  cuDevicePrimaryCtxRelease_v2: ["CUresult", ["CUdevice"]],

  // Context management
  cuCtxSetCurrent: ["CUresult", ["CUcontext"]],
  cuCtxGetCurrent: ["CUresult", ["CUcontext *"]],
  cuCtxSynchronize: ["CUresult", []],

  // Module management
  cuModuleLoadData: ["CUresult", ["CUmodule *", "const void *"]],
  cuModuleUnload: ["CUresult", ["CUmodule"]],
  cuModuleGetFunction: ["CUresult", ["CUfunction *", "CUmodule", "const char *"]],
  cuModuleGetGlobal_v2: ["CUresult", ["CUdeviceptr *", "size_t *", "CUmodule", "const char *"]],

  // Memory management
  cuMemGetInfo_v2: ["CUresult", ["size_t *", "size_t *"]],
  cuMemAlloc_v2: ["CUresult", ["CUdeviceptr *", "size_t"]],
  cuMemFree_v2: ["CUresult", ["CUdeviceptr"]],
  cuMemcpyHtoD_v2: ["CUresult", ["CUdeviceptr", "const void *", "size_t"]],
  cuMemcpyDtoH_v2: ["CUresult", ["void *", "CUdeviceptr", "size_t"]],
  cuMemcpyDtoD_v2: ["CUresult", ["CUdeviceptr", "CUdeviceptr", "size_t"]],
  cuMemcpyHtoDAsync_v2: ["CUresult", ["CUdeviceptr", "const void *", "size_t", "CUstream"]],
  cuMemcpyDtoHAsync_v2: ["CUresult", ["void *", "CUdeviceptr", "size_t", "CUstream"]],
  cuMemcpyDtoDAsync_v2: ["CUresult", ["CUdeviceptr", "CUdeviceptr", "size_t", "CUstream"]],
  cuMemsetD8_v2: ["CUresult", ["CUdeviceptr", "unsigned char", "size_t"]],
  cuMemsetD32_v2: ["CUresult", ["CUdeviceptr", "unsigned int", "size_t"]],
  cuMemsetD8Async: ["CUresult", ["CUdeviceptr", "unsigned char", "size_t", "CUstream"]],
  cuMemsetD32Async: ["CUresult", ["CUdeviceptr", "unsigned int", "size_t", "CUstream"]],
  cuMemAllocHost_v2: ["CUresult", ["void **", "size_t"]],
  cuMemFreeHost: ["CUresult", ["void *"]],

  // Stream management
  cuStreamCreate: ["CUresult", ["CUstream *", "unsigned int"]],
  cuStreamDestroy_v2: ["CUresult", ["CUstream"]],
  cuStreamSynchronize: ["CUresult", ["CUstream"]],
  cuStreamQuery: ["CUresult", ["CUstream"]],
  cuStreamWaitEvent: ["CUresult", ["CUstream", "CUevent", "unsigned int"]],
  cuStreamBeginCapture_v2: ["CUresult", ["CUstream", "CUstreamCaptureMode"]],
  cuStreamEndCapture: ["CUresult", ["CUstream", "CUgraph *"]],

  // Event management
  cuEventCreate: ["CUresult", ["CUevent *", "unsigned int"]],
  cuEventDestroy_v2: ["CUresult", ["CUevent"]],
  cuEventRecord: ["CUresult", ["CUevent", "CUstream"]],
  cuEventSynchronize: ["CUresult", ["CUevent"]],
  cuEventQuery: ["CUresult", ["CUevent"]],
  cuEventElapsedTime_v2: ["CUresult", ["float *", "CUevent", "CUevent"]],
  cuEventElapsedTime: ["CUresult", ["float *", "CUevent", "CUevent"]],

  // Execution control
  cuFuncGetAttribute: ["CUresult", ["int *", "CUfunction_attribute", "CUfunction"]],
  cuFuncSetAttribute: ["CUresult", ["CUfunction", "CUfunction_attribute", "int"]],
  cuFuncGetParamInfo: ["CUresult", ["CUfunction", "size_t", "size_t *", "size_t *"]],
  cuLaunchKernelEx: ["CUresult", ["const CUlaunchConfig *", "CUfunction", "void **", "void **"]],

  // Graph management
  cuGraphInstantiateWithFlags: ["CUresult", ["CUgraphExec *", "CUgraph", "unsigned long long"]],
  cuGraphLaunch: ["CUresult", ["CUgraphExec", "CUstream"]],
  cuGraphExecDestroy: ["CUresult", ["CUgraphExec"]],
  cuGraphDestroy: ["CUresult", ["CUgraph"]],

  // Occupancy
  cuOccupancyMaxActiveClusters: ["CUresult", ["int *", "CUfunction", "const CUlaunchConfig *"]],

  // Tensor map object management
  cuTensorMapEncodeTiled: [
    "CUresult",
    [
      "CUtensorMap *",
      "CUtensorMapDataType",
      "cuuint32_t",
      "void *",
      "const cuuint64_t *",
      "const cuuint64_t *",
      "const cuuint32_t *",
      "const cuuint32_t *",
      "CUtensorMapInterleave",
      "CUtensorMapSwizzle",
      "CUtensorMapL2promotion",
      "CUtensorMapFloatOOBfill",
    ],
  ],
} as const;

/** Every symbol in the table. */
export type DriverSymbol = keyof typeof bindings;

/**
 * Symbols a working driver may lack; they are bound when present and `undefined` otherwise.
 * cuFuncGetParamInfo appeared in 12.4 and cuEventElapsedTime_v2 in 12.8; the old
 * cuEventElapsedTime is the fallback on older drivers (the loader uses whichever exists).
 */
export const optionalSymbols = [
  "cuFuncGetParamInfo",
  "cuEventElapsedTime_v2",
  "cuEventElapsedTime",
  "cuOccupancyMaxActiveClusters",
] as const satisfies readonly DriverSymbol[];

export type OptionalDriverSymbol = (typeof optionalSymbols)[number];
