#ifndef GPUCTL_DAEMON_CORE_SELECTOR_H_
#define GPUCTL_DAEMON_CORE_SELECTOR_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpuctl/v1/limits.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// Limits on a ProcessSelector (service.proto) and on labels anywhere.
inline constexpr size_t kMaxJobIdBytes = 256;
inline constexpr int kMaxSelectorPids = 4096;
inline constexpr int kMaxSelectorRankRanges = 1024;
using ipc::kMaxLabelKeyBytes;
using ipc::kMaxLabels;
using ipc::kMaxLabelValueBytes;

// A label as ipc.proto defines it: a key of 1-253 bytes of [A-Za-z0-9._/-]
// and a value of at most 253 bytes of printable ASCII. INVALID_ARGUMENT
// naming `what` ("Hello label", "selector label") and the offending part.
absl::Status ValidateLabel(absl::string_view what, absl::string_view key, absl::string_view value);

// At most 64 bytes of `s`, quoted, with non-printable bytes escaped, so a
// message stays readable whatever the input.
std::string QuoteExcerpt(absl::string_view s);

// Whether the selector has a criterion: job id, pids, ranks or labels.
bool HasCriterion(const v1::ProcessSelector& selector);

// Checks sizes and ranges (job id length, pid count and values, rank ranges
// with 0 <= first <= last, label count and syntax). INVALID_ARGUMENT with a
// message naming the offending value.
absl::Status ValidateSelector(const v1::ProcessSelector& selector);

// The selector as text, for messages and manifests:
// `job "42" and ranks 0-3,8 and label team=ml`. "any process" when it has
// no criterion.
std::string DescribeSelector(const v1::ProcessSelector& selector);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_SELECTOR_H_
