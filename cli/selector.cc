#include "cli/selector.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/flag_number.h"
#include "cli/format.h"

namespace gpuctl::cli {
namespace {

constexpr absl::string_view kRankSetHelp = "expected N or N-M, comma-separated, e.g. 0-3,8";

// A rank: decimal digits only (no sign, no spaces), within int32.
bool ParseRank(absl::string_view text, int32_t* rank) {
  if (text.empty() || text.size() > 10) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value > std::numeric_limits<int32_t>::max()) return false;
  *rank = static_cast<int32_t>(value);
  return true;
}

bool ValidLabelKey(absl::string_view key) {
  if (key.empty() || key.size() > kMaxLabelKeyBytes) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '/' || c == '-';
  });
}

bool ValidLabelValue(absl::string_view value) {
  if (value.size() > kMaxLabelValueBytes) return false;
  return std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

absl::Status AddLabels(const std::vector<std::string>& labels, v1::ProcessSelector& selector) {
  auto& map = *selector.mutable_labels();
  for (const std::string& label : labels) {
    size_t eq = label.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label \"", Printable(label), "\": expected KEY=VALUE"));
    }
    std::string key = label.substr(0, eq);
    std::string value = label.substr(eq + 1);
    if (!ValidLabelKey(key)) {
      return absl::InvalidArgumentError(absl::StrCat("--label \"", Printable(label),
                                                     "\": the key must be 1-", kMaxLabelKeyBytes,
                                                     " characters of A-Z a-z 0-9 . _ / -"));
    }
    if (!ValidLabelValue(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label \"", Printable(label), "\": the value must be at most ",
                       kMaxLabelValueBytes, " printable ASCII characters"));
    }
    auto [it, inserted] = map.insert({key, value});
    if (!inserted && it->second != value) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label: key \"", key, "\" given twice with different values (\"",
                       Printable(it->second), "\" and \"", Printable(value), "\")"));
    }
  }
  if (map.size() > kMaxSelectorLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("--label: at most ", kMaxSelectorLabels, " labels, got ", map.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<v1::RankRange>> ParseRankSet(absl::string_view text) {
  std::vector<v1::RankRange> ranges;
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--rank \"\": empty rank set; ", kRankSetHelp));
  }
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rank \"", Printable(text), "\": \"", Printable(part), "\" ", why, "; ", kRankSetHelp));
    };
    if (part.empty()) return bad("is empty");
    size_t dash = part.find('-');
    int32_t first = 0;
    int32_t last = 0;
    if (dash == absl::string_view::npos) {
      if (!ParseRank(part, &first)) return bad("is not a rank");
      last = first;
    } else {
      if (!ParseRank(part.substr(0, dash), &first) || !ParseRank(part.substr(dash + 1), &last)) {
        return bad("is not a rank range");
      }
      if (first > last) return bad("ends before it starts");
    }
    v1::RankRange range;
    range.set_first(first);
    range.set_last(last);
    ranges.push_back(range);
  }
  return ranges;
}

std::vector<v1::RankRange> MergeRankRanges(std::vector<v1::RankRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const v1::RankRange& a, const v1::RankRange& b) {
    return std::make_pair(a.first(), a.last()) < std::make_pair(b.first(), b.last());
  });
  std::vector<v1::RankRange> merged;
  for (const v1::RankRange& r : ranges) {
    // int64 so that last + 1 cannot overflow at INT32_MAX.
    if (!merged.empty() && static_cast<int64_t>(r.first()) <= int64_t{merged.back().last()} + 1) {
      merged.back().set_last(std::max(merged.back().last(), r.last()));
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::string RankSetText(const google::protobuf::RepeatedPtrField<v1::RankRange>& ranges) {
  return absl::StrJoin(ranges, ",", [](std::string* out, const v1::RankRange& r) {
    absl::StrAppend(out, r.first());
    if (r.last() != r.first()) absl::StrAppend(out, "-", r.last());
  });
}

absl::StatusOr<v1::ProcessSelector> BuildSelector(const SelectorFlags& flags) {
  v1::ProcessSelector selector;
  selector.set_job_id(flags.job_id);
  if (flags.pids.size() > kMaxSelectorPids) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pid: at most ", kMaxSelectorPids, " pids, got ", flags.pids.size()));
  }
  for (const std::string& text : flags.pids) {
    absl::StatusOr<uint64_t> pid =
        ParseFlagNumber("--pid", text, "a process id", 1, std::numeric_limits<int32_t>::max());
    if (!pid.ok()) return pid.status();
    selector.add_pids(static_cast<int32_t>(*pid));
  }
  std::vector<v1::RankRange> ranges;
  for (const std::string& set : flags.rank_sets) {
    absl::StatusOr<std::vector<v1::RankRange>> parsed = ParseRankSet(set);
    if (!parsed.ok()) return parsed.status();
    ranges.insert(ranges.end(), parsed->begin(), parsed->end());
  }
  ranges = MergeRankRanges(std::move(ranges));
  if (ranges.size() > kMaxSelectorRankRanges) {
    return absl::InvalidArgumentError(absl::StrCat("--rank: at most ", kMaxSelectorRankRanges,
                                                   " separate ranges, got ", ranges.size()));
  }
  for (v1::RankRange& r : ranges) *selector.add_ranks() = std::move(r);
  if (absl::Status s = AddLabels(flags.labels, selector); !s.ok()) return s;
  absl::StatusOr<uint64_t> limit =
      ParseFlagNumber("--limit", flags.limit, "a number of processes per host (0: no limit)", 0,
                      std::numeric_limits<uint32_t>::max());
  if (!limit.ok()) return limit.status();
  selector.set_limit(static_cast<uint32_t>(*limit));
  selector.set_include_helpers(flags.include_helpers);
  if (flags.all_jobs && flags.pids.empty()) {
    return absl::InvalidArgumentError(
        "--all-jobs: applies to --pid (a pid whose descendants belong to several jobs)");
  }
  selector.set_allow_multiple_jobs(flags.all_jobs);
  return selector;
}

bool HasCriterion(const v1::ProcessSelector& selector) {
  return !selector.job_id().empty() || selector.pids_size() > 0 || selector.ranks_size() > 0 ||
         !selector.labels().empty();
}

std::string DescribeSelector(const v1::ProcessSelector& s) {
  std::vector<std::string> parts;
  if (!s.job_id().empty()) parts.push_back(absl::StrCat("job \"", Printable(s.job_id()), "\""));
  if (s.pids_size() > 0) {
    parts.push_back(
        absl::StrCat(s.pids_size() == 1 ? "pid " : "pids ", absl::StrJoin(s.pids(), ",")));
  }
  if (s.ranks_size() > 0) {
    bool one = s.ranks_size() == 1 && s.ranks(0).first() == s.ranks(0).last();
    parts.push_back(absl::StrCat(one ? "rank " : "ranks ", RankSetText(s.ranks())));
  }
  std::vector<std::pair<std::string, std::string>> labels(s.labels().begin(), s.labels().end());
  std::sort(labels.begin(), labels.end());
  for (const auto& [key, value] : labels) {
    parts.push_back(absl::StrCat("label ", Printable(key), "=", Printable(value)));
  }
  std::string text = parts.empty() ? "every process" : absl::StrJoin(parts, " and ");
  if (s.limit() > 0) absl::StrAppend(&text, ", at most ", s.limit(), " per host");
  if (s.include_helpers()) absl::StrAppend(&text, ", helpers included");
  if (s.allow_multiple_jobs()) absl::StrAppend(&text, ", of every job");
  return text;
}

}  // namespace gpuctl::cli
