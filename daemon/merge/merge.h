#ifndef GPUCTL_DAEMON_MERGE_MERGE_H_
#define GPUCTL_DAEMON_MERGE_MERGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/merge/clock_offsets.h"

namespace gpuctl::merge {

enum class MergeFormat { kAuto, kJson, kProto };

struct MergeOptions {
  MergeFormat format = MergeFormat::kAuto;
  // kAuto writes JSON up to both of these (the inputs' decompressed JSON
  // and their events, summed) and protobuf past either: the old
  // chrome://tracing viewer struggles past about a million events, and a
  // browser cannot hold a JSON text much past 512 MiB.
  uint64_t json_max_events = 1'000'000;
  uint64_t json_max_bytes = uint64_t{256} << 20;
};

// How one rank went.
struct MergedRank {
  std::string path, process_name, host;
  int64_t rank = -1, pid = -1, merged_pid = 0;
  std::optional<HostClock> clock;
  uint64_t events = 0;       // traceEvents elements read
  uint64_t written = 0;      // events written (an X is one, whatever the format)
  uint64_t metadata = 0;     // M events, which became the tracks' names
  uint64_t skipped = 0;      // no usable ts (or an X without a usable dur)
  uint64_t unsupported = 0;  // no `ph`, or (protobuf) an event it has no form for
};

struct MergeResult {
  std::string path;  // the file written
  MergeFormat format = MergeFormat::kJson;
  bool gzip = false;
  int64_t base_time_ns = 0;  // JSON: the ts axis' origin
  uint64_t stored_bytes = 0;
  std::vector<MergedRank> ranks;  // in merged order (by rank)
  std::vector<std::string> warnings;
};

// Where and how a merge of `events` events in `bytes` of JSON writes, for
// an `out` path as given: --merge-format wins; else a .pftrace or
// .perfetto-trace name means protobuf; else JSON within the options' sizes,
// protobuf past them, and then a name ending .json or .json.gz becomes
// .pftrace (so that a name never says JSON of a protobuf file). JSON is
// gzip-compressed when the path ends in .gz.
MergeResult ChooseOutput(const std::string& out, const MergeOptions& options, uint64_t events,
                         uint64_t bytes);

// Writes every rank of `files` (trace files as `gpuctl analyze` reads them,
// docs/trace-format.md) into one trace at `out` (docs/analyze.md,
// "--merge"). Each file is read twice, as a stream: first for its
// identity, rows, names and time range (which both layouts write after the
// events), then for its events, written one at a time. Each rank's times
// are moved onto the caller's clock with its host's manifest clock offset
// (the manifests beside the files, `_gpuctl/`). Any file that cannot be
// read fails the whole merge (INVALID_ARGUMENT or NOT_FOUND naming it and
// a byte offset) and nothing is written: the output appears whole, by
// rename, or not at all.
absl::StatusOr<MergeResult> MergeTraces(const std::vector<std::string>& files,
                                        const std::string& out, const MergeOptions& options);

}  // namespace gpuctl::merge

#endif  // GPUCTL_DAEMON_MERGE_MERGE_H_
