#ifndef GPUCTL_CLI_BOUNDED_PARALLEL_H_
#define GPUCTL_CLI_BOUNDED_PARALLEL_H_

#include <cstddef>
#include <functional>

namespace gpuctl::cli {

// Runs task(0) ... task(count - 1) on min(count, parallel) threads, each
// taking the next index as soon as it is free, and returns when all have
// returned. Tasks run in index order of their start. parallel 0 means 1.
void RunBounded(size_t count, size_t parallel, const std::function<void(size_t)>& task);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_BOUNDED_PARALLEL_H_
