// The schedule section: scheduled sampling rules and the host's budgets
// (daemon/scheduler/schedule_options.h).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/config/config_schema.h"
#include "daemon/config/config_values.h"
#include "daemon/config/daemon_config.h"
#include "daemon/core/selector.h"
#include "daemon/core/steps.h"
#include "daemon/core/trace_request.h"
#include "daemon/scheduler/schedule_options.h"

namespace gpuctl::daemon {
namespace {

using scheduler::Blackout;
using scheduler::ScheduleRule;

constexpr absl::string_view kWeekdays[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
constexpr size_t kMaxActivities = 64;

// The rule (or blackout) being read: the last one appended.
ScheduleRule& CurrentRule(DaemonOptions* o) { return o->schedule.rules.back(); }
Blackout& CurrentBlackout(DaemonOptions* o) { return CurrentRule(o).blackouts.back(); }

// A plain decimal in [0, 1]: "0.05", "1", ".5" is refused (write 0.5).
absl::StatusOr<double> ReadFraction(const ConfigValue& v, bool zero_allowed) {
  absl::StatusOr<std::string> text = v.String();
  if (!text.ok()) return text.status();
  const size_t dot = text->find('.');
  const bool digits_only =
      !text->empty() && (*text)[0] != '.' &&
      std::all_of(
          text->begin(), text->end(),
          [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.'; }) &&
      std::count(text->begin(), text->end(), '.') <= 1 &&
      (dot == std::string::npos || dot + 1 < text->size());
  double value = 0;
  if (!digits_only || !absl::SimpleAtod(*text, &value) || value > 1 ||
      (!zero_allowed && value == 0)) {
    return v.Error(absl::StrCat(QuoteConfigText(*text), " is not a fraction ",
                                zero_allowed ? "from 0" : "above 0", " to 1 (like 0.05)"));
  }
  return value;
}

bool ParseRank(absl::string_view text, int32_t* rank) {
  return !text.empty() && std::all_of(text.begin(), text.end(), absl::ascii_isdigit) &&
         absl::SimpleAtoi(text, rank) && *rank >= 0;
}

// The rank sets of `gpuctl trace --rank`: "0-3,8".
absl::Status ReadRanks(const ConfigValue& v, DaemonOptions* o) {
  absl::StatusOr<std::string> text = v.String();
  if (!text.ok()) return text.status();
  v1::ProcessSelector& selector = CurrentRule(o).selector;
  selector.clear_ranks();
  for (absl::string_view part : absl::StrSplit(*text, ',')) {
    size_t dash = part.find('-');
    int32_t first = 0;
    int32_t last = 0;
    const bool ok = dash == absl::string_view::npos
                        ? ParseRank(part, &first) && ParseRank(part, &last)
                        : ParseRank(part.substr(0, dash), &first) &&
                              ParseRank(part.substr(dash + 1), &last) && first <= last;
    if (!ok) {
      return v.Error(absl::StrCat(QuoteConfigText(part),
                                  " is not a rank or rank range; "
                                  "expected N or N-M, comma-separated, e.g. \"0-3,8\""));
    }
    v1::RankRange* range = selector.add_ranks();
    range->set_first(first);
    range->set_last(last);
  }
  if (selector.ranks_size() > kMaxSelectorRankRanges) {
    return v.Error(absl::StrCat("more than ", kMaxSelectorRankRanges, " ranges"));
  }
  return absl::OkStatus();
}

absl::Status ReadLabels(const ConfigValue& v, DaemonOptions* o) {
  std::vector<std::pair<std::string, std::string>> pairs;
  if (absl::Status s = ReadLabelPairs(v, &pairs); !s.ok()) return s;
  auto* labels = CurrentRule(o).selector.mutable_labels();
  labels->clear();
  for (auto& [key, value] : pairs) (*labels)[key] = std::move(value);
  return absl::OkStatus();
}

absl::Span<const ConfigKey> SelectorKeys() {
  static constexpr ConfigKey kKeys[] = {
      {.name = "job",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             absl::StatusOr<std::string> job = v.String();
             if (!job.ok()) return job.status();
             if (job->empty() || job->size() > kMaxJobIdBytes) {
               return v.Error(absl::StrCat("a job id is 1 to ", kMaxJobIdBytes, " bytes"));
             }
             CurrentRule(o).selector.set_job_id(*job);
             return absl::OkStatus();
           }},
      {.name = "ranks", .read = ReadRanks},
      {.name = "labels", .read = ReadLabels},
      {.name = "include_helpers",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             absl::StatusOr<bool> b = v.Bool();
             if (!b.ok()) return b.status();
             CurrentRule(o).selector.set_include_helpers(*b);
             return absl::OkStatus();
           }},
  };
  return kKeys;
}

// A list of scalars, each read by `item` (entry i of `v`, 1-based in
// messages).
template <typename ReadItem>
absl::Status ReadList(const ConfigValue& v, absl::string_view what, size_t max, ReadItem item) {
  const YAML::Node& node = v.node();
  if (!node.IsSequence()) {
    return v.Error(absl::StrCat("expected a list of ", what, ", found ", DescribeNodeType(node)));
  }
  if (node.size() > max) return v.Error(absl::StrCat("more than ", max, " entries"));
  for (size_t i = 0; i < node.size(); ++i) {
    ConfigValue entry(node[i], absl::StrCat(v.key(), "[", i, "]"), LineOf(node[i]), v.file(),
                      false);
    if (absl::Status s = item(entry); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadDays(const ConfigValue& v, DaemonOptions* o) {
  uint8_t days = 0;
  absl::Status s = ReadList(v, "weekdays (mon ... sun)", 7, [&days](const ConfigValue& day) {
    absl::StatusOr<std::string> text = day.String();
    if (!text.ok()) return text.status();
    const auto* it = std::find(std::begin(kWeekdays), std::end(kWeekdays), *text);
    if (it == std::end(kWeekdays)) {
      return day.Error(absl::StrCat(QuoteConfigText(*text),
                                    " is not a weekday (mon, tue, wed, thu, fri, sat, sun)"));
    }
    days |= static_cast<uint8_t>(1u << (it - std::begin(kWeekdays)));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (days == 0) return v.Error("an empty list of days; leave days out to mean every day");
  CurrentBlackout(o).days = days;
  return absl::OkStatus();
}

absl::Status ReadHours(const ConfigValue& v, DaemonOptions* o) {
  absl::StatusOr<std::string> text = v.String();
  if (!text.ok()) return text.status();
  std::vector<absl::string_view> parts = absl::StrSplit(*text, '-');
  int first = -1;
  int end = -1;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &first) ||
      !absl::SimpleAtoi(parts[1], &end) || first < 0 || end > 24 || first >= end ||
      !std::all_of(text->begin(), text->end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-';
      })) {
    return v.Error(absl::StrCat(QuoteConfigText(*text),
                                " is not a range of UTC hours FIRST-END with 0 <= FIRST < END <= "
                                "24 (\"9-17\": from 09:00 to 17:00)"));
  }
  CurrentBlackout(o).first_hour = first;
  CurrentBlackout(o).end_hour = end;
  return absl::OkStatus();
}

absl::Span<const ConfigKey> BlackoutKeys() {
  static constexpr ConfigKey kKeys[] = {
      {.name = "days", .read = ReadDays},
      {.name = "hours", .read = ReadHours},
  };
  return kKeys;
}

absl::Status ReadBlackouts(const ConfigValue& v, DaemonOptions* o) {
  CurrentRule(o).blackouts.clear();
  const YAML::Node& node = v.node();
  if (!node.IsSequence()) {
    return v.Error(
        absl::StrCat("expected a list of blackouts ({days: [sat, sun], hours: 9-17}), "
                     "found ",
                     DescribeNodeType(node)));
  }
  if (node.size() > scheduler::kMaxBlackouts) {
    return v.Error(absl::StrCat("more than ", scheduler::kMaxBlackouts, " blackouts"));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    ConfigValue entry(node[i], absl::StrCat(v.key(), "[", i, "]"), LineOf(node[i]), v.file(),
                      false);
    if (!node[i].IsMap()) {
      return entry.Error(
          absl::StrCat("expected a mapping (days, hours), found ", DescribeNodeType(node[i])));
    }
    CurrentRule(o).blackouts.emplace_back();
    if (absl::Status s = ReadConfigMapping(entry, BlackoutKeys(), o); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadActivities(const ConfigValue& v, DaemonOptions* o) {
  std::vector<std::string> activities;
  absl::Status s = ReadList(v, "activity names", kMaxActivities, [&](const ConfigValue& item) {
    absl::StatusOr<std::string> text = item.String();
    if (!text.ok()) return text.status();
    activities.push_back(*std::move(text));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  CurrentRule(o).activities = std::move(activities);
  return absl::OkStatus();
}

template <typename T>
absl::Status ReadRuleCount(const ConfigValue& v, uint64_t min, uint64_t max, T* out) {
  absl::StatusOr<uint64_t> n = v.Count(min, max);
  if (!n.ok()) return n.status();
  *out = static_cast<T>(*n);
  return absl::OkStatus();
}

absl::Span<const ConfigKey> RuleKeys() {
  static constexpr ConfigKey kKeys[] = {
      {.name = "name",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return StoreTo(v.String(), &CurrentRule(o).name); }},
      {.name = "selector", .keys = SelectorKeys},
      {.name = "probability",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return StoreTo(ReadFraction(v, false), &CurrentRule(o).probability);
           }},
      {.name = "period",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return StoreTo(v.Duration(ZeroDuration::kRefused), &CurrentRule(o).period);
           }},
      {.name = "window",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return StoreTo(v.Duration(ZeroDuration::kRefused), &CurrentRule(o).window);
           }},
      {.name = "step_period",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return ReadRuleCount(v, 1, scheduler::kMaxStepPeriod, &CurrentRule(o).step_period);
           }},
      {.name = "window_steps",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return ReadRuleCount(v, 1, kMaxIterations, &CurrentRule(o).window_steps);
           }},
      {.name = "activities", .read = ReadActivities},
      {.name = "blackout", .read = ReadBlackouts},
      {.name = "min_step",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return ReadRuleCount(v, 0, kMaxPlausibleStep, &CurrentRule(o).min_step);
           }},
      {.name = "daily_cap",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return ReadRuleCount(v, 0, 1000000, &CurrentRule(o).daily_cap);
           }},
      {.name = "anomaly", .keys = AnomalyRuleKeys, .open = OpenAnomalyRule},
  };
  return kKeys;
}

// A nice level 0-19, or "idle" for SCHED_IDLE.
absl::Status ReadWorkerNice(const ConfigValue& v, DaemonOptions* o) {
  absl::StatusOr<std::string> text = v.String();
  if (!text.ok()) return text.status();
  if (*text == "idle") {
    o->schedule.worker_idle = true;
    return absl::OkStatus();
  }
  int nice = -1;
  if (text->empty() || !std::all_of(text->begin(), text->end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(*text, &nice) || nice > scheduler::kMaxWorkerNice) {
    return v.Error(absl::StrCat(QuoteConfigText(*text), " is not a nice level from 0 to ",
                                scheduler::kMaxWorkerNice, ", or idle (SCHED_IDLE)"));
  }
  o->schedule.worker_idle = false;
  o->schedule.worker_nice = nice;
  return absl::OkStatus();
}

absl::Status ReadRules(const ConfigValue& v, DaemonOptions* o) {
  o->schedule.rules.clear();
  const YAML::Node& node = v.node();
  if (!node.IsSequence()) {
    return v.Error(absl::StrCat("expected a list of rules, found ", DescribeNodeType(node)));
  }
  if (node.size() > scheduler::kMaxScheduleRules) {
    return v.Error(
        absl::StrCat("lists ", node.size(), " rules, more than ", scheduler::kMaxScheduleRules));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    ConfigValue entry(node[i], absl::StrCat(v.key(), "[", i, "]"), LineOf(node[i]), v.file(),
                      false);
    if (!node[i].IsMap()) {
      return entry.Error(
          absl::StrCat("expected a rule (a mapping with name, selector, ...), "
                       "found ",
                       DescribeNodeType(node[i])));
    }
    o->schedule.rules.emplace_back();
    if (absl::Status s = ReadConfigMapping(entry, RuleKeys(), o); !s.ok()) return s;
    // An anomaly rule captures every anomaly it sees.
    if (CurrentRule(o).anomaly_triggered() && CurrentRule(o).probability == 0) {
      CurrentRule(o).probability = 1;
    }
    if (absl::Status s = scheduler::ValidateRule(CurrentRule(o)); !s.ok()) {
      return entry.Error(s.message());
    }
  }
  return absl::OkStatus();
}

constexpr ConfigKey kScheduleKeys[] = {
    {.name = "seed",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return StoreTo(v.String(), &o->schedule.seed); }},
    {.name = "max_duty_cycle",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return StoreTo(ReadFraction(v, false), &o->schedule.max_duty_cycle);
         }},
    {.name = "capture_time_per_day",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return StoreTo(v.Duration(ZeroDuration::kAllowed), &o->schedule.capture_time_per_day);
         }},
    {.name = "min_free_store_bytes",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return StoreTo(v.Size(), &o->schedule.min_free_store_bytes); }},
    {.name = "rules", .read = ReadRules},
    {.name = "worker_threads",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadRuleCount(v, 1, scheduler::kMaxWorkerThreads, &o->schedule.worker_threads);
         }},
    {.name = "worker_nice", .read = ReadWorkerNice},
};

}  // namespace

absl::Span<const ConfigKey> ScheduleConfigKeys() { return kScheduleKeys; }

absl::Status CheckScheduleSection(const ConfigLocations& where, DaemonOptions* o) {
  if (absl::Status s = scheduler::ValidateSchedule(o->schedule); !s.ok()) {
    const bool about_seed = o->schedule.seed.empty() && o->schedule.enabled();
    const std::string key = about_seed                          ? "schedule"
                            : where.Line("schedule.rules") != 0 ? "schedule.rules"
                                                                : "schedule";
    return where.Error(key, s.message());
  }
  return absl::OkStatus();
}

absl::Status ReadLabelPairs(const ConfigValue& v,
                            std::vector<std::pair<std::string, std::string>>* out) {
  const YAML::Node& node = v.node();
  if (!node.IsMap()) {
    return v.Error(
        absl::StrCat("expected a mapping of labels (team: ml), found ", DescribeNodeType(node)));
  }
  if (node.size() > kMaxLabels) return v.Error(absl::StrCat("more than ", kMaxLabels, " labels"));
  out->clear();
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) return v.Error("a label key must be a name");
    ConfigValue value(entry.second, absl::StrCat(v.key(), ".", entry.first.Scalar()),
                      LineOf(entry.first), v.file(), false);
    absl::StatusOr<std::string> text = value.String();
    if (!text.ok()) return text.status();
    if (absl::Status s = ValidateLabel("label", entry.first.Scalar(), *text); !s.ok()) {
      return v.Error(s.message());
    }
    out->emplace_back(entry.first.Scalar(), *std::move(text));
  }
  return absl::OkStatus();
}

}  // namespace gpuctl::daemon
