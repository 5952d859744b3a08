// The program a sampled process exec's in the host context tests: spins in
// a function only this program has for argv[1] milliseconds, then exits.
#include <time.h>

#include <cstdint>
#include <cstdlib>

namespace {

int64_t MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

}  // namespace

extern "C" __attribute__((noinline)) uint64_t GpuctlHostctxExecedSpin(int64_t until_ns) {
  volatile uint64_t acc = 1;
  while (MonotonicNs() < until_ns) {
    for (uint64_t i = 0; i < 200000; ++i) acc = acc * 6364136223846793005ULL + i;
  }
  return acc;
}

int main(int argc, char** argv) {
  const int64_t ms = argc > 1 ? std::atoll(argv[1]) : 100;
  GpuctlHostctxExecedSpin(MonotonicNs() + ms * 1000000);
  return 0;
}
