#ifndef GPUCTL_CLI_TRACE_PROGRESS_H_
#define GPUCTL_CLI_TRACE_PROGRESS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/host_status.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::cli {

// Shows a running trace to the user (on stderr). `host` indexes the
// targets the display was made with. Calls may come from several threads
// but never at the same time (the caller serializes them).
class TraceProgress {
 public:
  virtual ~TraceProgress() = default;
  virtual void Connecting(size_t host) = 0;
  virtual void Started(size_t host, const v1::TraceStarted& started) = 0;
  virtual void Progress(size_t host, const v1::ProcessProgress& progress) = 0;
  virtual void Result(size_t host, const v1::ProcessResult& result) = 0;
  // The host's stream is over (or it was never reached).
  virtual void HostDone(size_t host, HostStatus status, absl::string_view error) = 0;
  // Every stream is over; a live display removes itself (and stops
  // redrawing).
  virtual void Finish() = 0;
  // Redraws a live display, as its own timer does (the window's clock
  // moves on between events); nothing for the plain one.
  virtual void Tick() {}
};

// How a live display keeps time.
struct LiveDisplayOptions {
  // The clock the window's elapsed and remaining time are read from.
  std::function<absl::Time()> now = [] { return absl::Now(); };
  // How often the display redraws itself from a thread of its own; zero:
  // on events and Tick() only.
  absl::Duration redraw_interval = absl::Milliseconds(250);
};

// One line per event, for logs and pipes. With one host:
//   trace <id>: 2 processes selected on <host>, window 2s
//   pid 123: capturing
//   pid 123: ok, 5000 events, 12.3 KiB
// With several, each line starts with the host ("node1: pid 123: ...") and
// each host's end is a line ("node3: unreachable: ...").
std::unique_ptr<TraceProgress> MakePlainProgress(std::ostream& err,
                                                 std::vector<std::string> targets);

// For a terminal, redrawn in place with ANSI cursor movement on every event
// and every redraw_interval; lines are cut to `columns` (the terminal's
// width) so none wraps. A header, then a line with the window's elapsed and
// remaining time (steps for an iteration window), the processes per phase
// and the trace data received so far. With one host: then one line per
// process (phase, bytes received, result; up to a limit, then a summary).
// With several: one line per host (state, processes per phase, events and
// bytes received), or summary lines past the limit.
std::unique_ptr<TraceProgress> MakeTerminalProgress(std::ostream& err, size_t columns,
                                                    std::vector<std::string> targets,
                                                    LiveDisplayOptions options = {});

// The download after a trace, per host: files and bytes saved of what the
// host stored. Thread-safe: hosts download in parallel.
class DownloadProgress {
 public:
  virtual ~DownloadProgress() = default;
  // `host` indexes the labels; `bytes` is what it stored (an estimate: the
  // manifest adds a little).
  virtual void Begin(size_t host, size_t files, uint64_t bytes) = 0;
  virtual void Update(size_t host, size_t files_done, uint64_t bytes_done) = 0;
  virtual void Done(size_t host, const absl::Status& status) = 0;
  // Every download is over: the display removes itself.
  virtual void Finish() = 0;
};

// For a terminal: one line per host downloading (a summary past a limit),
// redrawn in place at most every redraw_interval, and on a file's
// completion. Off a terminal nothing is shown (the command prints where
// the files went).
std::unique_ptr<DownloadProgress> MakeTerminalDownloadProgress(std::ostream& err, size_t columns,
                                                               std::vector<std::string> labels,
                                                               LiveDisplayOptions options = {});

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_TRACE_PROGRESS_H_
