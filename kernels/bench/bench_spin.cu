// Holds the stream busy while the host queues a benchmark's timed calls. JavaScript needs tens of
// microseconds to queue one decode call; without a head start the GPU would wait for the host between
// the start event and the kernel, and that gap would be timed as kernel time.
#include <cstdint>

namespace {
// %globaltimer: nanoseconds, updated every microsecond or so (PTX ISA §10.30,
// https://docs.nvidia.com/cuda/parallel-thread-execution/#special-registers-globaltimer).
__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
}  // namespace

// One thread spins until `ns` nanoseconds have passed since it started. Grid 1, block 1.
extern "C" __global__ void bench_spin(unsigned long long ns) {
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < ns) {
    __nanosleep(1000);
  }
}
