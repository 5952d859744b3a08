#ifndef GPUCTL_DAEMON_HOSTCTX_HOST_CONTEXT_SERVICE_H_
#define GPUCTL_DAEMON_HOSTCTX_HOST_CONTEXT_SERVICE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/common/clock.h"
#include "daemon/common/event_loop.h"
#include "daemon/common/thread_pool_executor.h"
#include "daemon/hostctx/recorder.h"
#include "daemon/hostctx/window_events.h"
#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl::hostctx {

struct HostContextServiceOptions {
  RecorderOptions recorder;
  // Recordings open at once (one per traced process); a Start beyond it
  // is unavailable, so a large selection cannot open unbounded events.
  size_t max_recordings = 256;
};

// Records host context for trace windows: one HostContextRecorder per
// traced process, all on a thread of the service's own (its event loop
// drains the rings and rescans /proc on timers), and a symbolizer thread
// (low priority) that names the frames once a recording finishes.
// Nothing runs while no recording does.
//
// Thread: Start and Finish may be called from any thread and return at
// once. `done` runs on the symbolizer thread (or the service's loop when
// there is nothing to symbolize). Shutdown, also run by the destructor,
// stops both threads; recordings still open are closed, and a Finish
// after it is never answered.
class HostContextService {
 public:
  using Done =
      absl::AnyInvocable<void(v1::HostContextResult, std::shared_ptr<const WindowEvents>) &&>;

  static absl::StatusOr<std::unique_ptr<HostContextService>> Create(
      HostContextServiceOptions options, Clock* clock);
  ~HostContextService();
  HostContextService(const HostContextService&) = delete;
  HostContextService& operator=(const HostContextService&) = delete;

  // Starts recording `pid` and its descendants under `key` (unique). A
  // failure (no privilege, the process gone) is kept for Finish to report.
  // `dwarf`: samples also unwound with DWARF call-frame information
  // (SamplerOptions::dwarf_unwind). `apart`: processes recorded on their
  // own, left out of the descendants with theirs (HostSampler::Start).
  void Start(uint64_t key, pid_t pid, bool samples, bool switches, bool dwarf = false,
             std::vector<pid_t> apart = {});
  // Stops the recording of `key` and calls `done` with its summary (state
  // RECORDED and the events, or UNAVAILABLE with the reason).
  void Finish(uint64_t key, Done done);
  void Shutdown();

 private:
  struct Recording {
    std::unique_ptr<HostContextRecorder> recorder;
    absl::Status started;
    bool samples = false;
    bool switches = false;
  };

  HostContextService(HostContextServiceOptions options, Clock* clock,
                     std::unique_ptr<daemon::EventLoop> loop);
  void StartOnLoop(uint64_t key, pid_t pid, bool samples, bool switches, bool dwarf,
                   const std::vector<pid_t>& apart);
  void FinishOnLoop(uint64_t key, Done done);

  const HostContextServiceOptions options_;
  Clock* const clock_;
  std::unique_ptr<daemon::EventLoop> loop_;
  ThreadPoolExecutor symbolizer_;
  std::thread thread_;
  bool shut_down_ = false;
  // Loop thread only.
  absl::flat_hash_map<uint64_t, Recording> recordings_;
};

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_HOST_CONTEXT_SERVICE_H_
