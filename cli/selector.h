#ifndef GPUCTL_CLI_SELECTOR_H_
#define GPUCTL_CLI_SELECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuctl/v1/limits.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::cli {

// The limits of ProcessSelector (service.proto); the CLI refuses more before
// anything is sent.
inline constexpr size_t kMaxSelectorPids = 4096;
inline constexpr size_t kMaxSelectorRankRanges = 1024;
inline constexpr size_t kMaxSelectorLabels = ipc::kMaxLabels;
// Label rules of the library's Hello (ipc.proto), which the daemon enforces.
using ipc::kMaxLabelKeyBytes;
using ipc::kMaxLabelValueBytes;

// The selector flags of `trace` and `ps`, as typed.
struct SelectorFlags {
  std::string job_id;
  std::vector<std::string> pids;       // each as typed; BuildSelector checks them
  std::vector<std::string> rank_sets;  // each "0-3,8"
  std::vector<std::string> labels;     // each "key=value"
  std::string limit = "0";
  bool include_helpers = false;
  bool all_jobs = false;  // --all-jobs: a --pid may reach several jobs
};

// Parses one rank set, "N", "N-M" or a comma-separated list of those
// ("0-3,8"), into inclusive ranges. INVALID_ARGUMENT names the bad element
// and says what was expected.
absl::StatusOr<std::vector<v1::RankRange>> ParseRankSet(absl::string_view text);

// Sorts ranges and merges overlapping or adjacent ones ("0-3,2-5,6" becomes
// "0-6").
std::vector<v1::RankRange> MergeRankRanges(std::vector<v1::RankRange> ranges);

// "0-3,8".
std::string RankSetText(const google::protobuf::RepeatedPtrField<v1::RankRange>& ranges);

// Validates and builds the selector. Errors name the flag and the bad value.
absl::StatusOr<v1::ProcessSelector> BuildSelector(const SelectorFlags& flags);

// True when the selector names processes by at least one criterion (job,
// pid, rank or label); gpuctld selects nothing for a Trace without one.
bool HasCriterion(const v1::ProcessSelector& selector);

// `job "42" and ranks 0-3,8 and label team=nlp`, for messages.
std::string DescribeSelector(const v1::ProcessSelector& selector);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_SELECTOR_H_
