#ifndef GPUCTL_CLI_TRACE_PROGRESS_H_
#define GPUCTL_CLI_TRACE_PROGRESS_H_

#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
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
  // Every stream is over; a live display removes itself.
  virtual void Finish() = 0;
};

// One line per event, for logs and pipes. With one host:
//   trace <id>: 2 processes selected on <host>, window 2s
//   pid 123: capturing
//   pid 123: ok, 5000 events, 12.3 KiB
// With several, each line starts with the host ("node1: pid 123: ...") and
// each host's end is a line ("node3: unreachable: ...").
std::unique_ptr<TraceProgress> MakePlainProgress(std::ostream& err,
                                                 std::vector<std::string> targets);

// For a terminal, redrawn in place with ANSI cursor movement on every event;
// lines are cut to `columns` (the terminal's width) so none wraps. With one
// host: a header and one line per process (up to a limit, then a summary).
// With several: a header and one line per host (state, processes, ok,
// failed), or summary lines past the limit.
std::unique_ptr<TraceProgress> MakeTerminalProgress(std::ostream& err, size_t columns,
                                                    std::vector<std::string> targets);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_TRACE_PROGRESS_H_
