#ifndef GPUCTL_DAEMON_SCHEDULER_SCHEDULE_OPTIONS_H_
#define GPUCTL_DAEMON_SCHEDULER_SCHEDULE_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon::scheduler {

// Limits of a schedule (the config's schedule section, docs/configuration.md).
inline constexpr size_t kMaxScheduleRules = 64;
inline constexpr size_t kMaxRuleNameBytes = 64;
inline constexpr size_t kMaxSeedBytes = 256;
inline constexpr size_t kMaxBlackouts = 32;
inline constexpr absl::Duration kMinPeriod = absl::Seconds(1);
inline constexpr absl::Duration kMaxPeriod = absl::Hours(24 * 7);
// A scheduled window is a trace window: at most the core's own maximum
// start-ahead, so a slot's capture can be requested ahead of time.
inline constexpr absl::Duration kMaxScheduledWindow = absl::Hours(1);
inline constexpr uint64_t kMaxStepPeriod = uint64_t{1} << 40;
inline constexpr double kDefaultMaxDutyCycle = 0.05;
// The pool that converts and compresses scheduled traces.
inline constexpr int kDefaultWorkerThreads = 1;
inline constexpr int kMaxWorkerThreads = 64;
inline constexpr int kDefaultWorkerNice = 19;
inline constexpr int kMaxWorkerNice = 19;

// Anomaly rules.
inline constexpr double kMaxSlowFactor = 1000;
inline constexpr absl::Duration kMinHangAfter = absl::Seconds(1);
inline constexpr absl::Duration kMaxHangAfter = absl::Hours(24);
inline constexpr absl::Duration kMinCooldown = absl::Seconds(1);
inline constexpr absl::Duration kMaxCooldown = absl::Hours(24 * 7);
inline constexpr absl::Duration kDefaultCooldown = absl::Minutes(30);
inline constexpr uint32_t kDefaultMinSamples = 8;
inline constexpr uint32_t kMaxMinSamples = 1024;
inline constexpr uint64_t kDefaultStepBucket = 100;

// What makes a rule an anomaly rule: it captures when a job's steps turn
// slow or stop, not in drawn slots (daemon/scheduler/anomaly_detector.h).
struct AnomalyTrigger {
  bool enabled = false;
  // A step slower than slow_factor x the job's rolling median; 0: off.
  double slow_factor = 0;
  // No step mark for this long; zero: off.
  absl::Duration hang_after = absl::ZeroDuration();
  // Durations the median needs before slow steps are judged.
  uint32_t min_samples = kDefaultMinSamples;
  // At most one capture per job and rule in this time on a host.
  absl::Duration cooldown = kDefaultCooldown;
  // The anomaly's step, in buckets of this many steps, names its capture
  // (trace id, first step), so hosts of the job that see the same event
  // land under one trace id.
  uint64_t step_bucket = kDefaultStepBucket;
};

// UTC hours [first_hour, end_hour) on the given weekdays during which a
// rule captures nothing. `days` is a bit set in absl::Weekday order, bit 0
// Monday .. bit 6 Sunday; 0 means every day.
struct Blackout {
  uint8_t days = 0;
  int first_hour = 0;
  int end_hour = 24;
};

// One sampling rule. Either a time rule (period, window) or a step rule
// (step_period, window_steps > 0): steps [k*step_period,
// k*step_period + window_steps) of a sampled block k. Or an anomaly rule
// (anomaly.enabled): no period; it captures `window` from the detection,
// or the `window_steps` steps from the next bucket boundary, of the job
// whose steps turned slow or stopped; its probability is 1.
struct ScheduleRule {
  std::string name;
  // job_id, ranks, labels, include_helpers; never pids or a limit, which
  // mean nothing across hosts.
  v1::ProcessSelector selector;
  double probability = 0;
  absl::Duration period = absl::ZeroDuration();
  absl::Duration window = absl::ZeroDuration();
  uint64_t step_period = 0;
  uint32_t window_steps = 0;
  std::vector<std::string> activities;
  std::vector<Blackout> blackouts;
  // A job is decided only once one of its processes on the host has a step
  // counter at this step or beyond (warm-up is skipped).
  uint64_t min_step = 0;
  // Captures per job and UTC day; 0: no cap. Time rules, and anomaly rules
  // (counted by each host for itself).
  uint32_t daily_cap = 0;
  AnomalyTrigger anomaly;

  bool anomaly_triggered() const { return anomaly.enabled; }
  bool step_aligned() const { return !anomaly.enabled && window_steps > 0; }
  bool time_driven() const { return !anomaly.enabled && window_steps == 0; }
};

struct ScheduleOptions {
  std::string seed;
  std::vector<ScheduleRule> rules;
  // A rule whose probability x window / period is above this is refused.
  double max_duty_cycle = kDefaultMaxDutyCycle;
  // Host limits, decided locally (so they may split a job's trace): the
  // capture window seconds this host starts per UTC day (0: no limit), and
  // the store's free space below which nothing is captured (0: no limit).
  absl::Duration capture_time_per_day = absl::ZeroDuration();
  uint64_t min_free_store_bytes = 0;
  // Scheduled (and anomaly) traces are converted and compressed on a pool
  // of their own, `worker_threads` threads at nice `worker_nice` or under
  // SCHED_IDLE, so that they yield to the job and an on-demand trace never
  // waits behind them. How this host works, not what it captures: not
  // part of the fingerprint.
  int worker_threads = kDefaultWorkerThreads;
  int worker_nice = kDefaultWorkerNice;
  bool worker_idle = false;

  bool enabled() const { return !rules.empty(); }
};

// probability x window / period (steps for a step rule); for an anomaly
// rule window / cooldown, 0 with window_steps (its steps' time is unknown).
double DutyCycle(const ScheduleRule& rule);

// Checks one rule alone: a name, a selector with a criterion and valid
// values but no pids or limit, a probability in (0, 1], exactly one of a
// time or step window, window within period, known activities, blackout
// hours, daily_cap only on a time rule. An anomaly rule: probability 1, no
// period or step_period, one of window or window_steps, a slow_factor above
// 1 or a hang_after, and the anomaly fields in range. INVALID_ARGUMENT
// naming the field.
absl::Status ValidateRule(const ScheduleRule& rule);

// Checks the whole schedule: every rule (ValidateRule), unique names, a
// seed when there are rules, and every rule's duty cycle within
// max_duty_cycle. INVALID_ARGUMENT naming the rule and the field.
absl::Status ValidateSchedule(const ScheduleOptions& options);

// SHA-256 (hex) of the schedule's canonical text (CanonicalScheduleText):
// equal on hosts that run the same schedule, whatever the file's layout.
std::string ScheduleFingerprint(const ScheduleOptions& options);
// One line per field in a fixed order, values in their exact forms.
std::string CanonicalScheduleText(const ScheduleOptions& options);

}  // namespace gpuctl::daemon::scheduler

#endif  // GPUCTL_DAEMON_SCHEDULER_SCHEDULE_OPTIONS_H_
