#include "daemon/scheduler/anomaly_detector.h"

#include <algorithm>
#include <utility>

namespace gpuctl::daemon::scheduler {
namespace {

// The newest durations of each process that go into the median: enough for
// a stable median, bounded for jobs with many processes on the host.
constexpr size_t kMedianSamplesPerProcess = 64;

// A hang outranks a slow step; slow steps compare by their time (they
// share the median).
bool Worse(const Anomaly& a, const Anomaly& b) {
  if (a.kind != b.kind) return a.kind == AnomalyKind::kHang;
  return a.step_time > b.step_time;
}

Anomaly MakeAnomaly(AnomalyKind kind, const ProcessSteps& p, uint64_t step,
                    absl::Duration step_time, absl::Duration median, bool in_progress) {
  return {.kind = kind,
          .pid = p.pid,
          .rank = p.rank,
          .step = step,
          .step_time = step_time,
          .median = median,
          .in_progress = in_progress};
}

}  // namespace

bool JobAnomalyDetector::Slow(absl::Duration step_time, absl::Duration median) const {
  return params_.slow_factor > 0 && median > absl::ZeroDuration() &&
         step_time > median * params_.slow_factor;
}

absl::Duration JobAnomalyDetector::Median(absl::Span<const ProcessSteps> processes) const {
  std::vector<absl::Duration> samples;
  for (const ProcessSteps& p : processes) {
    if (p.current_step < params_.min_step) continue;
    const size_t n = std::min(p.recent.size(), kMedianSamplesPerProcess);
    samples.insert(samples.end(), p.recent.end() - static_cast<ptrdiff_t>(n), p.recent.end());
  }
  if (samples.empty() || samples.size() < params_.min_samples) return absl::ZeroDuration();
  auto middle = samples.begin() + static_cast<ptrdiff_t>(samples.size() / 2);
  std::nth_element(samples.begin(), middle, samples.end());
  return *middle;
}

std::optional<Anomaly> JobAnomalyDetector::Judge(const ProcessSteps& p, const Seen* seen,
                                                 absl::Duration median, absl::Time now) const {
  std::optional<Anomaly> worst;
  const bool running_reported = seen != nullptr && seen->reported_step == p.current_step;
  if (p.last_step_time.has_value() && now > *p.last_step_time && !running_reported) {
    const absl::Duration running = now - *p.last_step_time;
    if (params_.hang_after > absl::ZeroDuration() && running >= params_.hang_after) {
      return MakeAnomaly(AnomalyKind::kHang, p, p.current_step, running, median, true);
    }
    if (Slow(running, median)) {
      worst = MakeAnomaly(AnomalyKind::kSlowStep, p, p.current_step, running, median, true);
    }
  }
  // Durations written since the last poll; the newest ended at the mark of
  // current_step, so it is step current_step - 1's.
  if (seen == nullptr || p.durations_total <= seen->durations_total) return worst;
  const uint64_t fresh =
      std::min<uint64_t>(p.durations_total - seen->durations_total, p.recent.size());
  for (uint64_t back = 0; back < fresh && back < p.current_step; ++back) {
    const absl::Duration d = p.recent[p.recent.size() - 1 - back];
    const uint64_t step = p.current_step - 1 - back;
    if (seen->reported_step == step || !Slow(d, median)) continue;
    Anomaly a = MakeAnomaly(AnomalyKind::kSlowStep, p, step, d, median, false);
    if (!worst || Worse(a, *worst)) worst = a;
  }
  return worst;
}

Detection JobAnomalyDetector::Observe(absl::Span<const ProcessSteps> processes, absl::Time now) {
  const absl::Duration median = Median(processes);
  std::optional<Anomaly> worst;
  absl::flat_hash_map<int32_t, Seen> next;
  for (const ProcessSteps& p : processes) {
    auto it = seen_.find(p.pid);
    const Seen* seen = it == seen_.end() ? nullptr : &it->second;
    Seen& kept = next[p.pid];
    kept.durations_total = p.durations_total;
    if (seen != nullptr) kept.reported_step = seen->reported_step;
    if (p.current_step < params_.min_step) continue;
    std::optional<Anomaly> a = Judge(p, seen, median, now);
    if (!a.has_value()) continue;
    if (a->in_progress) kept.reported_step = a->step;
    if (!worst || Worse(*a, *worst)) worst = a;
  }
  // Processes gone from the job are forgotten.
  seen_ = std::move(next);
  if (!worst.has_value()) return {};
  if (cooldown_until_.has_value() && now < *cooldown_until_) {
    return {.verdict = AnomalyVerdict::kCoolingDown, .anomaly = *worst};
  }
  cooldown_until_ = now + params_.cooldown;
  return {.verdict = AnomalyVerdict::kAnomaly, .anomaly = *worst};
}

}  // namespace gpuctl::daemon::scheduler
