#ifndef GPUCTL_DAEMON_HOSTCTX_RECORDER_H_
#define GPUCTL_DAEMON_HOSTCTX_RECORDER_H_

#include <sys/types.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/common/clock.h"
#include "daemon/common/task_runner.h"
#include "daemon/hostctx/sampler.h"

namespace gpuctl::hostctx {

struct RecorderOptions {
  SamplerOptions sampler;
  // How often the rings are drained: several times within what one ring
  // holds (SamplerOptions::ring_pages).
  absl::Duration poll_interval = absl::Milliseconds(100);
  // How often /proc is scanned for threads and descendants that appeared
  // (a scan costs about 13 ms of CPU on a busy host); zero: never.
  absl::Duration rescan_interval = absl::Seconds(1);
};

// Runs a HostSampler for one window at a time on a component's task
// runner: Start opens the events and schedules the polls and rescans as
// timers, Finish cancels them and returns the capture.
//
// Thread: the task runner's thread only (Start, Finish and destruction
// too). Destruction cancels the timers and closes the events.
class HostContextRecorder {
 public:
  HostContextRecorder(RecorderOptions options, Clock* clock, TaskRunner* runner);
  ~HostContextRecorder();
  HostContextRecorder(const HostContextRecorder&) = delete;
  HostContextRecorder& operator=(const HostContextRecorder&) = delete;

  // As HostSampler::Start.
  absl::Status Start(const std::vector<pid_t>& pids, const std::vector<pid_t>& apart = {});
  // Stops and returns what the window recorded; an empty capture when not
  // started.
  HostCapture Finish();
  bool running() const { return sampler_.running(); }

 private:
  void SchedulePoll();
  void ScheduleRescan();
  void CancelTimers();

  const RecorderOptions options_;
  TaskRunner* const runner_;
  HostSampler sampler_;
  TaskRunner::TimerId poll_timer_ = 0;
  TaskRunner::TimerId rescan_timer_ = 0;
};

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_RECORDER_H_
