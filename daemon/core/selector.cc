#include "daemon/core/selector.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuctl::daemon {
namespace {

bool IsLabelKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '/' || c == '-';
}

}  // namespace

std::string QuoteExcerpt(absl::string_view s) {
  constexpr size_t kShown = 64;
  std::string out = "\"";
  for (char c : s.substr(0, kShown)) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    }
  }
  if (s.size() > kShown) out += "...";
  return out + "\"";
}

namespace {

std::string DescribeRanks(const v1::ProcessSelector& selector) {
  std::vector<std::string> parts;
  for (const v1::RankRange& r : selector.ranks()) {
    parts.push_back(r.first() == r.last() ? absl::StrCat(r.first())
                                          : absl::StrCat(r.first(), "-", r.last()));
  }
  const bool one =
      selector.ranks_size() == 1 && selector.ranks(0).first() == selector.ranks(0).last();
  return absl::StrCat(one ? "rank " : "ranks ", absl::StrJoin(parts, ","));
}

std::string DescribeLabels(const v1::ProcessSelector& selector) {
  std::vector<std::pair<std::string, std::string>> sorted(selector.labels().begin(),
                                                          selector.labels().end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> parts;
  parts.reserve(sorted.size());
  for (const auto& [key, value] : sorted) parts.push_back(absl::StrCat(key, "=", value));
  return absl::StrCat(sorted.size() == 1 ? "label " : "labels ", absl::StrJoin(parts, ","));
}

}  // namespace

absl::Status ValidateLabel(absl::string_view what, absl::string_view key, absl::string_view value) {
  if (key.empty() || key.size() > kMaxLabelKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " key ", QuoteExcerpt(key), " must be 1 to ", kMaxLabelKeyBytes, " bytes long"));
  }
  if (!std::all_of(key.begin(), key.end(), IsLabelKeyChar)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " key ", QuoteExcerpt(key),
                                                   " may hold only letters, digits and . _ / -"));
  }
  if (value.size() > kMaxLabelValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", key, " has a value of ", value.size(),
                                                   " bytes, more than ", kMaxLabelValueBytes));
  }
  if (!std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", key, " has a value ", QuoteExcerpt(value), " that is not printable ASCII"));
  }
  return absl::OkStatus();
}

bool HasCriterion(const v1::ProcessSelector& selector) {
  return !selector.job_id().empty() || selector.pids_size() > 0 || selector.ranks_size() > 0 ||
         !selector.labels().empty();
}

absl::Status ValidateSelector(const v1::ProcessSelector& selector) {
  if (selector.job_id().size() > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("job id is longer than ", kMaxJobIdBytes, " bytes"));
  }
  if (selector.pids_size() > kMaxSelectorPids) {
    return absl::InvalidArgumentError(
        absl::StrCat(selector.pids_size(), " pids, more than ", kMaxSelectorPids));
  }
  for (int32_t pid : selector.pids()) {
    if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("invalid pid ", pid));
  }
  if (selector.ranks_size() > kMaxSelectorRankRanges) {
    return absl::InvalidArgumentError(
        absl::StrCat(selector.ranks_size(), " rank ranges, more than ", kMaxSelectorRankRanges));
  }
  for (const v1::RankRange& r : selector.ranks()) {
    if (r.first() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank range ", r.first(), "-", r.last(), " has a negative rank"));
    }
    if (r.first() > r.last()) {
      return absl::InvalidArgumentError(absl::StrCat("rank range ", r.first(), "-", r.last(),
                                                     " is empty: its first rank exceeds its last"));
    }
  }
  if (selector.labels_size() > static_cast<int>(kMaxLabels)) {
    return absl::InvalidArgumentError(
        absl::StrCat(selector.labels_size(), " labels, more than ", kMaxLabels));
  }
  for (const auto& [key, value] : selector.labels()) {
    if (auto st = ValidateLabel("selector label", key, value); !st.ok()) return st;
  }
  return absl::OkStatus();
}

std::string DescribeSelector(const v1::ProcessSelector& selector) {
  std::vector<std::string> parts;
  if (!selector.job_id().empty()) parts.push_back(absl::StrCat("job \"", selector.job_id(), "\""));
  if (selector.pids_size() > 0) {
    parts.push_back(absl::StrCat("pids [", absl::StrJoin(selector.pids(), ", "), "]"));
  }
  if (selector.ranks_size() > 0) parts.push_back(DescribeRanks(selector));
  if (!selector.labels().empty()) parts.push_back(DescribeLabels(selector));
  std::string out = parts.empty() ? "any process" : absl::StrJoin(parts, " and ");
  if (selector.include_helpers()) absl::StrAppend(&out, ", launchers and helpers included");
  if (selector.allow_multiple_jobs()) absl::StrAppend(&out, ", of every job");
  if (selector.limit() > 0) absl::StrAppend(&out, ", at most ", selector.limit());
  return out;
}

}  // namespace gpuctl::daemon
