#ifndef GPUCTL_DAEMON_HOSTCTX_TESTING_SAMPLES_H_
#define GPUCTL_DAEMON_HOSTCTX_TESTING_SAMPLES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "daemon/hostctx/perf_record.h"

namespace gpuctl::hostctx::testing {

// A sample with a frame-pointer chain only.
inline CpuSample SampleAt(uint32_t pid, uint32_t tid, uint64_t time_ns, std::vector<uint64_t> ips) {
  CpuSample sample;
  sample.pid = pid;
  sample.tid = tid;
  sample.time_ns = time_ns;
  sample.ips = std::move(ips);
  return sample;
}

}  // namespace gpuctl::hostctx::testing

#endif  // GPUCTL_DAEMON_HOSTCTX_TESTING_SAMPLES_H_
