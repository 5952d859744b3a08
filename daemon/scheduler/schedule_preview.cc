#include "daemon/scheduler/schedule_preview.h"

#include <algorithm>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"

namespace gpuctl::daemon::scheduler {
namespace {

// The first slot of `rule` that starts on or after `t`.
int64_t FirstSlotFrom(const ScheduleRule& rule, absl::Time t) {
  int64_t slot = SlotOf(rule.period, t);
  if (SlotStart(rule.period, slot) < t) ++slot;
  return slot;
}

// The slots [first, last] of one rule: the daily cap's count is carried
// from the start of the first slot's UTC day, as SharedSlotOutcome counts.
void PreviewRule(const ScheduleOptions& options, size_t rule_index, absl::string_view job_id,
                 int64_t first, int64_t last, std::vector<PreviewEntry>& out) {
  const ScheduleRule& rule = options.rules[rule_index];
  const absl::TimeZone utc = absl::UTCTimeZone();
  absl::CivilDay day = absl::ToCivilDay(SlotStart(rule.period, first), utc);
  int64_t slot = FirstSlotFrom(rule, absl::FromCivil(day, utc));
  uint32_t drawn_today = 0;
  for (; slot <= last; ++slot) {
    const SlotDecision d = DecideSlot(options.seed, rule, job_id, slot);
    const absl::CivilDay slot_day = absl::ToCivilDay(d.slot_start, utc);
    if (slot_day != day) {
      day = slot_day;
      drawn_today = 0;
    }
    if (!d.sampled) continue;
    SlotOutcome outcome = SlotOutcome::kCapture;
    if (InBlackout(rule, d.start, d.start + rule.window)) {
      outcome = SlotOutcome::kBlackout;
    } else if (rule.daily_cap > 0 && drawn_today++ >= rule.daily_cap) {
      outcome = SlotOutcome::kDailyCap;
    }
    if (slot >= first) out.push_back({rule_index, d, outcome});
  }
}

}  // namespace

absl::StatusOr<Preview> PreviewJob(const ScheduleOptions& options, absl::string_view job_id,
                                   absl::Time from, absl::Time to, size_t max_entries) {
  Preview preview;
  if (to <= from) return preview;
  struct Range {
    size_t rule;
    int64_t first;
    int64_t last;
  };
  std::vector<Range> ranges;
  size_t evaluations = 0;
  for (size_t i = 0; i < options.rules.size(); ++i) {
    const ScheduleRule& rule = options.rules[i];
    if (!rule.time_driven()) continue;
    if (!rule.selector.job_id().empty() && rule.selector.job_id() != job_id) continue;
    // Windows start at most period - window into their slot: slots from
    // one period before `from` may still start inside the range.
    const int64_t first = SlotOf(rule.period, from - rule.period);
    const int64_t last = SlotOf(rule.period, to);
    const absl::Time day_start = absl::FromCivil(
        absl::ToCivilDay(SlotStart(rule.period, first), absl::UTCTimeZone()), absl::UTCTimeZone());
    evaluations += static_cast<size_t>(last - FirstSlotFrom(rule, day_start) + 1);
    if (evaluations > kMaxPreviewEvaluations) {
      return absl::InvalidArgumentError(
          absl::StrCat("the preview would decide more than ", kMaxPreviewEvaluations,
                       " slots (rule \"", rule.name, "\", period ",
                       absl::FormatDuration(rule.period), "): ask for a shorter duration"));
    }
    ranges.push_back({i, first, last});
  }
  for (const Range& r : ranges)
    PreviewRule(options, r.rule, job_id, r.first, r.last, preview.entries);
  std::erase_if(preview.entries, [&](const PreviewEntry& e) {
    return e.decision.start < from || e.decision.start >= to;
  });
  std::stable_sort(preview.entries.begin(), preview.entries.end(),
                   [](const PreviewEntry& a, const PreviewEntry& b) {
                     return std::tie(a.decision.start, a.rule_index) <
                            std::tie(b.decision.start, b.rule_index);
                   });
  if (preview.entries.size() > max_entries) {
    preview.entries.resize(max_entries);
    preview.truncated = true;
  }
  return preview;
}

}  // namespace gpuctl::daemon::scheduler
