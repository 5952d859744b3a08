// The anomaly section of a schedule rule (scheduler::AnomalyTrigger): what
// makes a step-time anomaly for that rule.
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/config/config_schema.h"
#include "daemon/config/config_values.h"
#include "daemon/config/daemon_config.h"
#include "daemon/scheduler/schedule_options.h"

namespace gpuctl::daemon {
namespace {

scheduler::AnomalyTrigger& CurrentAnomaly(DaemonOptions* o) {
  return o->schedule.rules.back().anomaly;
}

// A plain decimal above 1 and at most kMaxSlowFactor: "3", "2.5".
absl::StatusOr<double> ReadFactor(const ConfigValue& v) {
  absl::StatusOr<std::string> text = v.String();
  if (!text.ok()) return text.status();
  const bool plain = !text->empty() &&
                     absl::ascii_isdigit(static_cast<unsigned char>((*text)[0])) &&
                     std::all_of(text->begin(), text->end(), [](char c) {
                       return absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.';
                     });
  double value = 0;
  if (!plain || !absl::SimpleAtod(*text, &value) || !std::isfinite(value) || value <= 1 ||
      value > scheduler::kMaxSlowFactor) {
    return v.Error(absl::StrCat(QuoteConfigText(*text), " is not a factor above 1 and at most ",
                                scheduler::kMaxSlowFactor, " (like 3 or 2.5)"));
  }
  return value;
}

template <typename T>
absl::Status ReadCount(const ConfigValue& v, uint64_t min, uint64_t max, T* out) {
  absl::StatusOr<uint64_t> n = v.Count(min, max);
  if (!n.ok()) return n.status();
  *out = static_cast<T>(*n);
  return absl::OkStatus();
}

// A duration within [min, max].
absl::Status ReadBoundedDuration(const ConfigValue& v, absl::Duration min, absl::Duration max,
                                 absl::Duration* out) {
  absl::StatusOr<absl::Duration> d = v.Duration(ZeroDuration::kRefused);
  if (!d.ok()) return d.status();
  if (*d < min || *d > max) {
    return v.Error(absl::StrCat(FormatConfigDuration(*d), " is out of range (",
                                FormatConfigDuration(min), " to ", FormatConfigDuration(max), ")"));
  }
  *out = *d;
  return absl::OkStatus();
}

constexpr ConfigKey kAnomalyKeys[] = {
    {.name = "slow_factor",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return StoreTo(ReadFactor(v), &CurrentAnomaly(o).slow_factor);
         }},
    {.name = "hang_after",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadBoundedDuration(v, scheduler::kMinHangAfter, scheduler::kMaxHangAfter,
                                      &CurrentAnomaly(o).hang_after);
         }},
    {.name = "cooldown",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadBoundedDuration(v, scheduler::kMinCooldown, scheduler::kMaxCooldown,
                                      &CurrentAnomaly(o).cooldown);
         }},
    {.name = "min_samples",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadCount(v, 1, scheduler::kMaxMinSamples, &CurrentAnomaly(o).min_samples);
         }},
    {.name = "step_bucket",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadCount(v, 1, scheduler::kMaxStepPeriod, &CurrentAnomaly(o).step_bucket);
         }},
};

}  // namespace

absl::Span<const ConfigKey> AnomalyRuleKeys() { return kAnomalyKeys; }

void OpenAnomalyRule(DaemonOptions* options) { CurrentAnomaly(options).enabled = true; }

}  // namespace gpuctl::daemon
