// A synthetic data-parallel training step, as the gpuctl client library
// records it (proto/gpuctl/v1/records.h): the input for realistic traces of
// any size in bench/make_traces.cc.
#ifndef GPUCTL_BENCH_TRACE_WORKLOAD_H_
#define GPUCTL_BENCH_TRACE_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpuctl::bench {

struct WorkloadOptions {
  int world_size = 1;
  // Rank r's process is first_pid + kPidStride * r.
  int32_t first_pid = 2104417;
  // Steps are added until each rank's trace has at least this many events
  // (the converter's: API calls, GPU ops, their two flow events, ranges,
  // steps, syncs).
  int64_t events = 0;
  uint64_t seed = 1;
  // The rank whose data loading is slow (the others wait for it in their
  // first all-reduce of each step); -1: none.
  int straggler = -1;
  int64_t window_start_ns = 0;
};

inline constexpr int32_t kPidStride = 97;

struct Workload {
  int32_t pid = 0;
  std::string payload;  // the capture payload, as libgpuctl.so sends it
  int64_t events = 0;   // trace events the converter writes for it, about
  int64_t steps = 0;
  int64_t window_end_ns = 0;
};

// Per step: a DataLoader range, the batch's host-to-device copies, a
// 12-layer transformer's forward (cuBLAS GEMMs, flash attention, PyTorch
// elementwise kernels) on the main thread, its backward on the autograd
// thread with NCCL all-reduces on their own stream, a fused AdamW step
// after a memset, and loss.item(): a device-to-host copy and a
// cudaStreamSynchronize. The ranks' NCCL kernels of one all-reduce end
// together: each starts when its rank is ready and spins until the last
// rank's has started. All ranks share one clock. Deterministic for a given
// seed. One workload per rank.
std::vector<Workload> BuildWorkloads(const WorkloadOptions& options);

}  // namespace gpuctl::bench

#endif  // GPUCTL_BENCH_TRACE_WORKLOAD_H_
