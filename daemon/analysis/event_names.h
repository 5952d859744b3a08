#ifndef GPUCTL_DAEMON_ANALYSIS_EVENT_NAMES_H_
#define GPUCTL_DAEMON_ANALYSIS_EVENT_NAMES_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "daemon/analysis/trace_model.h"

namespace gpuctl::analysis {

// What a CUDA runtime or driver function is, from its name as CUPTI, gpuctl
// and kineto write it: CUPTI's version suffix (`_v7000`) and the
// per-thread default stream suffixes (`_ptsz`, `_ptds`) are ignored.
ApiKind ClassifyApiCall(absl::string_view name);

// An NCCL kernel: a name beginning with "nccl" (ncclKernel_*,
// ncclDevKernel_*), in any case.
bool IsCommunicationKernel(absl::string_view name);

// A copy's direction and whether one side is pageable host memory, from the
// name both gpuctl and kineto give copies: "Memcpy HtoD (Pageable -> Device)".
struct CopyName {
  CopyDirection direction = CopyDirection::kOther;
  bool pageable = false;
};
CopyName ParseCopyName(absl::string_view name);

// N of a "ProfilerStep#N" range; nullopt for any other name.
std::optional<int64_t> ParseStepName(absl::string_view name);

absl::string_view CopyDirectionName(CopyDirection direction);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_EVENT_NAMES_H_
