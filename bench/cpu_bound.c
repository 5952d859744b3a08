/* A CPU-bound program with a fixed, input-independent amount of work: the
 * baseline for the idle-cost benchmark (bench/idle_cost.sh). It never calls
 * gpuctl; with LD_PRELOAD=libgpuctl.so whatever the library costs shows up
 * as extra instructions. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  uint64_t iterations = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000000ull;
  uint64_t x = 88172645463325252ull, acc = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    acc += x & 0xff;
  }
  printf("%llu\n", (unsigned long long)acc);
  return 0;
}
