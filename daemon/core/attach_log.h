#ifndef GPUCTL_DAEMON_CORE_ATTACH_LOG_H_
#define GPUCTL_DAEMON_CORE_ATTACH_LOG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/common/clock.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/peer_channel.h"

namespace gpuctl::daemon {

// What the daemon's log says about processes attaching and detaching.
//
// A preloaded shell or shim attaches a process for every helper it execs
// on the way to the real program (a pyenv shim: dozens in a second), and
// each leaves again at once. So "process attached" is logged once a
// process has stayed `settle` (or at once when it matters to a trace);
// processes that leave before are not logged one by one but counted, and
// one summary line per `summary_every` at most says how many there were
// and which programs. Everything else is logged as it happens.
//
// On the daemon's loop only.
class AttachLog {
 public:
  struct Options {
    absl::Duration settle = absl::Seconds(2);
    absl::Duration summary_every = absl::Minutes(1);
  };
  // What is logged of an attached process.
  struct Process {
    int32_t pid = 0;
    std::string job_id;
    int32_t rank = -1;
    std::string program;  // the executable's base name
    int labels = 0;
    bool step_counter = false;
    std::string library_version{};
  };

  AttachLog(TaskRunner* loop, Clock* clock, Options options);
  ~AttachLog();
  AttachLog(const AttachLog&) = delete;
  AttachLog& operator=(const AttachLog&) = delete;

  void Attached(PeerId peer, Process process);
  // The process takes part in a trace: logged now if it was not yet.
  void Noteworthy(PeerId peer);
  // `in_trace`: it left during a capture (always logged).
  void Detached(PeerId peer, bool clean, absl::string_view reason, bool in_trace);

  // Short-lived processes counted since the last summary (tests).
  size_t pending_short_lived() const { return short_lived_; }

 private:
  struct Pending {
    Process process;
    absl::Time attached;
    TaskRunner::TimerId timer = 0;
  };
  void LogAttached(PeerId peer, const Process& process);
  void FlushSummary();

  TaskRunner* const loop_;
  Clock* const clock_;
  const Options options_;
  std::map<PeerId, Pending> pending_;  // attached, not logged yet
  std::map<PeerId, int32_t> logged_;   // attached and logged: their pids
  size_t short_lived_ = 0;
  std::set<std::string> programs_;  // of the short-lived, at most a few
  TaskRunner::TimerId summary_timer_ = 0;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_ATTACH_LOG_H_
