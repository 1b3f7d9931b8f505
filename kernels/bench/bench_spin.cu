// Harness kernels of the benchmark. bench_spin holds the stream busy while the host queues the timed
// calls: JavaScript needs tens of microseconds to queue one decode call, and without a head start the GPU
// would wait for the host between the start event and the kernel, and that gap would be timed as kernel
// time. bench_clock_probe reads the SM clock right after them.
#include <cstdint>

#include "../common/ptx.cuh"

// One thread spins until `ns` nanoseconds have passed since it started. Grid 1, block 1.
extern "C" __global__ void bench_spin(unsigned long long ns) {
  const uint64_t start = ptx::globaltimer();
  while (ptx::globaltimer() - start < ns) {
    __nanosleep(1000);
  }
}

// The SM clock the GPU runs at right after a benchmark's timed calls (queued behind them on their
// stream): one thread counts SM cycles (clock64) over `ns` nanoseconds of %globaltimer. A power-limited
// GPU runs below its highest clock under load (an H200 at 1.67-1.78 GHz of 1.98 in the dense
// compute-bound cases, docs/dense-decode.md §11), and the clock governor reacts over milliseconds, so
// these tens of microseconds still see the loaded clock. out[0] = cycles, out[1] = nanoseconds (both
// fit 32 bits for ns < 1 ms). Grid 1, block 1.
extern "C" __global__ void bench_clock_probe(unsigned int* out, unsigned long long ns) {
  const uint64_t t0 = ptx::globaltimer();
  const long long c0 = clock64();
  uint64_t t = t0;
  while (t - t0 < ns) t = ptx::globaltimer();
  const long long c1 = clock64();
  out[0] = static_cast<unsigned int>(c1 - c0);
  out[1] = static_cast<unsigned int>(t - t0);
}
