// The words the annotation API reads on every call. Outside a capture
// window gpuctl_range_push/pop cost one relaxed load of `gate` and record
// nothing; any non-zero gate sends the caller to the slow path.
#ifndef GPUCTL_CLIENT_LIB_SRC_ANNOTATION_STATE_H_
#define GPUCTL_CLIENT_LIB_SRC_ANNOTATION_STATE_H_

#include <atomic>
#include <cstdint>

namespace gpuctl::client {

// A host capture window is open: annotations are recorded.
inline constexpr uint32_t kGateCapturing = 1;
// This process is a fork child whose parent ran an agent: the next API call
// starts the child's own agent.
inline constexpr uint32_t kGateRestartAfterFork = 2;

struct AnnotationState {
  alignas(64) std::atomic<uint32_t> gate{0};
  // Step counter behind gpuctl_step(); counts outside windows too, so step
  // numbers in a trace are the process's real step numbers.
  alignas(64) std::atomic<uint64_t> step{0};
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_ANNOTATION_STATE_H_
