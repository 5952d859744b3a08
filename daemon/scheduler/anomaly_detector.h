// Step-time anomalies of one job on one host: a step slower than a factor
// of the job's rolling median, or a process whose steps stopped (a hang).
// Pure: it judges what the step counters said at an instant it is given,
// never reads a clock, and keeps only what it needs to report each
// anomaly once and to hold the cool-down.
#ifndef GPUCTL_DAEMON_SCHEDULER_ANOMALY_DETECTOR_H_
#define GPUCTL_DAEMON_SCHEDULER_ANOMALY_DETECTOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace gpuctl::daemon::scheduler {

// What makes an anomaly (the rule's `anomaly` section).
struct AnomalyParams {
  // A step longer than slow_factor x the job's rolling median is slow;
  // 0: slow steps are not looked for.
  double slow_factor = 0;
  // A process whose last step began this long ago hangs; zero: hangs are
  // not looked for.
  absl::Duration hang_after = absl::ZeroDuration();
  // Warm-up: a process is judged once its current step reaches min_step,
  // and slow steps once the job's judged processes hold min_samples
  // durations for the median.
  uint64_t min_step = 0;
  uint32_t min_samples = 8;
  // After an anomaly is reported, the next ones within this time are
  // reported as cooling down.
  absl::Duration cooldown = absl::Minutes(30);
};

// One process's step counter at the instant judged.
struct ProcessSteps {
  int32_t pid = 0;
  int32_t rank = -1;
  uint64_t current_step = 0;
  std::optional<absl::Time> last_step_time;
  // How many durations the process ever wrote, and the newest of them,
  // oldest first (the step page's ring).
  uint64_t durations_total = 0;
  std::vector<absl::Duration> recent;
};

enum class AnomalyKind { kSlowStep, kHang };

struct Anomaly {
  AnomalyKind kind = AnomalyKind::kSlowStep;
  int32_t pid = 0;
  int32_t rank = -1;
  // The slow step (a finished one: the step before the one its end
  // marked, counted back along the ring), or the step still running.
  uint64_t step = 0;
  // Its duration; for a step still running, the time since its mark.
  absl::Duration step_time = absl::ZeroDuration();
  // The job's rolling median it was compared with; zero when unknown (a
  // hang found before the warm-up's samples).
  absl::Duration median = absl::ZeroDuration();
  bool in_progress = false;
};

enum class AnomalyVerdict {
  kNone,
  kAnomaly,      // report it: the cool-down starts now
  kCoolingDown,  // an anomaly within the cool-down of the last one
};

struct Detection {
  AnomalyVerdict verdict = AnomalyVerdict::kNone;
  Anomaly anomaly;
};

// Judges one job's processes on this host, poll after poll. Each finished
// step's duration is judged once (the durations a process had when first
// seen are history, not news); a step still running is reported once,
// and not again when it finishes. A hang outranks a slow step; among slow
// steps the longest relative to the median is reported. Not thread-safe:
// the schedule driver's loop owns it.
class JobAnomalyDetector {
 public:
  explicit JobAnomalyDetector(const AnomalyParams& params) : params_(params) {}

  Detection Observe(absl::Span<const ProcessSteps> processes, absl::Time now);

 private:
  struct Seen {
    uint64_t durations_total = 0;
    // The running step already reported, if any.
    std::optional<uint64_t> reported_step;
  };

  // The rolling median over the judged processes' recent durations; zero
  // with fewer than min_samples.
  absl::Duration Median(absl::Span<const ProcessSteps> processes) const;
  // The worst anomaly of one process, against `median`.
  std::optional<Anomaly> Judge(const ProcessSteps& p, const Seen* seen, absl::Duration median,
                               absl::Time now) const;
  bool Slow(absl::Duration step_time, absl::Duration median) const;

  AnomalyParams params_;
  absl::flat_hash_map<int32_t, Seen> seen_;
  std::optional<absl::Time> cooldown_until_;
};

}  // namespace gpuctl::daemon::scheduler

#endif  // GPUCTL_DAEMON_SCHEDULER_ANOMALY_DETECTOR_H_
