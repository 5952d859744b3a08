#ifndef GPUCTL_DAEMON_MERGE_RANK_PLAN_H_
#define GPUCTL_DAEMON_MERGE_RANK_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/merge/clock_offsets.h"
#include "daemon/merge/event_stream.h"

namespace gpuctl::merge {

// A row of one file (its pid and tid as written, numbers or strings) and
// the thread it becomes in the merged trace.
struct RankRow {
  Json pid, tid;
  std::string name;  // "GPU 0 / stream 7", the host thread's name, ...
  int64_t merged_tid = 0;
  uint64_t uuid = 0;  // its Perfetto track: process_uuid + 1 + its index
};

// One input file (one rank) as the first pass found it, and its place in
// the merged trace.
struct RankPlan {
  std::string path;
  std::string format;  // "gpuctl" (has the `gpuctl` member) or "kineto"
  std::string host, trace_id;
  int64_t pid = -1, rank = -1;     // -1: the file does not say
  int64_t base_time_ns = 0;        // baseTimeNanoseconds; 0 when absent (ts is then absolute)
  std::optional<HostClock> clock;  // none: left on the host's own clock
  uint64_t events = 0;             // traceEvents elements
  uint64_t decompressed_bytes = 0;
  // The earliest and latest usable ts, aligned (Unix ns on the caller's
  // clock); min > max when the file has none.
  int64_t min_aligned_ns = INT64_MAX, max_aligned_ns = INT64_MIN;

  std::vector<RankRow> rows;                           // in order of first appearance
  absl::flat_hash_map<std::string, size_t> row_index;  // RowKey -> rows[i]

  int64_t merged_pid = 0;
  uint64_t process_uuid = 0;  // merged_pid << 32; counters from process_uuid + 2^31
  std::string process_name;   // "node1 rank 3 pid 4242"
  std::string labels;         // trace id and clock, in words

  // Unix ns on the caller's clock of a time on this file's `ts` axis.
  int64_t Align(int64_t ts_ns) const {
    return base_time_ns + ts_ns - (clock.has_value() ? clock->offset_ns : 0);
  }
  // The row of an event; nullptr for a row the first pass did not see.
  const RankRow* FindRow(const Json& event) const;
};

// The key of an event's row: its pid and tid as JSON text.
std::string RowKey(const Json& event);

// The first pass over one file: identity, base time, rows and their names
// (from the `M` events), event count and time range. `clocks` gives the
// host's clock, matched by file name, else by the file's host. Errors as
// StreamTrace's.
absl::StatusOr<RankPlan> ScanRank(const std::string& path, const ManifestClocks& clocks);

// Orders the ranks (by rank, unknown last, then host, pid and path) and
// gives each a pid of its own, 1, 2, ..., whatever hosts and pids they came
// from, its rows tids merged_pid * 1000000 + 1, 2, ..., and every track a
// uuid. INVALID_ARGUMENT when a file has 1000000 rows or more.
absl::Status AssignMergedIds(std::vector<RankPlan>& ranks);

}  // namespace gpuctl::merge

#endif  // GPUCTL_DAEMON_MERGE_RANK_PLAN_H_
