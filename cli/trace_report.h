#ifndef GPUCTL_CLI_TRACE_REPORT_H_
#define GPUCTL_CLI_TRACE_REPORT_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/trace_download.h"
#include "cli/trace_fanout.h"

namespace gpuctl::cli {

// Everything `gpuctl trace` reports at the end.
struct TraceReport {
  std::string trace_id;
  // Time windows: the instant sent to every host.
  std::optional<absl::Time> start_time;
  std::optional<absl::Duration> max_start_skew;
  std::optional<absl::Duration> duration;
  // Iteration windows.
  uint32_t iterations = 0;
  std::optional<uint64_t> start_step;
  // <output_root>/<trace_id> when any file was saved.
  std::string saved_to;
  std::vector<HostTrace> hosts;
  std::vector<HostDownload> downloads;  // one per host (not attempted: no download)
};

// The per-process table: HOST (as contacted), PID, RANK, STATUS, EVENTS,
// BYTES, FILE, by host (in the order given), rank (unknown last), pid; a process without a result
// is a "no result" row. With several hosts, a host that failed as a whole is a row of its own with
// the reason under it, and a summary line follows.
void PrintTraceTable(const TraceReport& report, std::ostream& out);

// The --json document (docs/cli.md).
std::string TraceReportJson(const TraceReport& report);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_TRACE_REPORT_H_
