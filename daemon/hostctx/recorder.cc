#include "daemon/hostctx/recorder.h"

#include <utility>

namespace gpuctl::hostctx {

HostContextRecorder::HostContextRecorder(RecorderOptions options, Clock* clock, TaskRunner* runner)
    : options_(std::move(options)), runner_(runner), sampler_(options_.sampler, clock) {}

HostContextRecorder::~HostContextRecorder() { CancelTimers(); }

absl::Status HostContextRecorder::Start(const std::vector<pid_t>& pids,
                                        const std::vector<pid_t>& apart) {
  if (options_.poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("host context needs a positive poll interval");
  }
  absl::Status started = sampler_.Start(pids, apart);
  if (!started.ok()) return started;
  SchedulePoll();
  ScheduleRescan();
  return absl::OkStatus();
}

HostCapture HostContextRecorder::Finish() {
  CancelTimers();
  return sampler_.Stop();
}

void HostContextRecorder::SchedulePoll() {
  poll_timer_ = runner_->PostDelayed(options_.poll_interval, [this] {
    poll_timer_ = 0;
    sampler_.Poll();
    SchedulePoll();
  });
}

void HostContextRecorder::ScheduleRescan() {
  if (options_.rescan_interval <= absl::ZeroDuration()) return;
  rescan_timer_ = runner_->PostDelayed(options_.rescan_interval, [this] {
    rescan_timer_ = 0;
    sampler_.Rescan();
    ScheduleRescan();
  });
}

void HostContextRecorder::CancelTimers() {
  if (poll_timer_ != 0) runner_->Cancel(poll_timer_);
  if (rescan_timer_ != 0) runner_->Cancel(rescan_timer_);
  poll_timer_ = 0;
  rescan_timer_ = 0;
}

}  // namespace gpuctl::hostctx
