// The PTX wrappers the kernels use, by family: one named inline function per instruction (ptx/*.cuh).
#pragma once
#include "ptx/convert.cuh"
#include "ptx/copy.cuh"
#include "ptx/mma.cuh"
#include "ptx/sync.cuh"
