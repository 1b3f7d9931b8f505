// Harness kernels of the benchmark. bench_spin holds the stream busy while the host queues the timed
// calls: JavaScript needs tens of microseconds to queue one decode call, and without a head start the GPU
// would wait for the host between the start event and the kernel, and that gap would be timed as kernel
// time.
#include <cstdint>

#include "../common/ptx.cuh"

// One thread spins until `ns` nanoseconds have passed since it started. Grid 1, block 1.
extern "C" __global__ void bench_spin(unsigned long long ns) {
  const uint64_t start = ptx::globaltimer();
  while (ptx::globaltimer() - start < ns) {
    __nanosleep(1000);
  }
}
