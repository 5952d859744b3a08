#ifndef GPUCTL_CLI_TRACE_PROGRESS_H_
#define GPUCTL_CLI_TRACE_PROGRESS_H_

#include <cstddef>
#include <memory>
#include <ostream>

#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::cli {

// Shows a running trace to the user (on stderr). Called from one thread.
class TraceProgress {
 public:
  virtual ~TraceProgress() = default;
  virtual void Started(const v1::TraceStarted& started) = 0;
  virtual void Progress(const v1::ProcessProgress& progress) = 0;
  virtual void Result(const v1::ProcessResult& result) = 0;
  // The stream is over; a live display removes itself.
  virtual void Finish() = 0;
};

// One line per event, for logs and pipes:
//   trace <id>: 2 processes selected on <host>
//   pid 123: capturing
//   pid 123: ok, 5000 events, 12.3 KiB
std::unique_ptr<TraceProgress> MakePlainProgress(std::ostream& err);

// For a terminal: a header and one line per process (up to a limit, then a
// summary line), redrawn in place with ANSI cursor movement on every event.
// Lines are cut to `columns` (the terminal's width) so none wraps.
std::unique_ptr<TraceProgress> MakeTerminalProgress(std::ostream& err, size_t columns);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_TRACE_PROGRESS_H_
