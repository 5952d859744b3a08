#include "cli/bounded_parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace gpuctl::cli {

void RunBounded(size_t count, size_t parallel, const std::function<void(size_t)>& task) {
  const size_t threads = std::min(count, std::max<size_t>(parallel, 1));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) task(i);
  };
  if (threads <= 1) {
    work();
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t t = 0; t + 1 < threads; ++t) pool.emplace_back(work);
  work();  // the calling thread is one of the workers
  for (std::thread& thread : pool) thread.join();
}

}  // namespace gpuctl::cli
