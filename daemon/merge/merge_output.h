#ifndef GPUCTL_DAEMON_MERGE_MERGE_OUTPUT_H_
#define GPUCTL_DAEMON_MERGE_MERGE_OUTPUT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/merge/event_stream.h"
#include "daemon/merge/rank_plan.h"

namespace gpuctl::merge {

// The merged file as it is written: buffered, gzip-compressed when asked
// (one member, zlib), in a temporary beside the final path that Commit
// renames into place, so a failed merge leaves no file and an earlier one
// at that path untouched. Not thread-safe.
class MergeOutput {
 public:
  static absl::StatusOr<std::unique_ptr<MergeOutput>> Create(const std::string& path, bool gzip);
  ~MergeOutput();
  MergeOutput(const MergeOutput&) = delete;
  MergeOutput& operator=(const MergeOutput&) = delete;

  absl::Status Write(absl::string_view data);
  absl::Status Commit();
  // Bytes of the file as stored (compressed when gzip), once committed.
  uint64_t stored_bytes() const { return stored_bytes_; }

 private:
  struct State;
  explicit MergeOutput(std::unique_ptr<State> state);
  absl::Status Flush(bool finish);

  std::unique_ptr<State> state_;
  uint64_t stored_bytes_ = 0;
};

// Which of Chrome's members an event's id came from: `id`, or `id2`'s
// `local` (scoped to the event's process) or `global` member.
enum class IdScope { kId, kLocal, kGlobal };

// Object events: N creates an object, O snapshots it, D destroys it.
inline bool IsObjectPhase(const std::string& ph) { return ph == "N" || ph == "O" || ph == "D"; }

// One event of a rank on its way out: times aligned, its row, its id made
// unique across ranks.
struct MergeEvent {
  const StreamedEvent* streamed = nullptr;
  std::string ph;
  int64_t aligned_ns = 0;         // Unix ns on the caller's clock
  std::optional<int64_t> dur_ns;  // X events
  const RankRow* row = nullptr;
  // Flows (s, t, f), async (b, e, n) and object (N, O, D) events with an
  // `id` or an `id2`: the merged id that replaces it, and the id as written
  // (the value of `id`, or of `id2`'s member; inside `streamed`).
  std::optional<uint64_t> merged_id;
  const Json* id = nullptr;
};

// A writer of one output format. The merge calls BeginRank for each rank
// in order, then Event for each of its events, and Finish once.
class MergeSink {
 public:
  virtual ~MergeSink() = default;
  virtual absl::Status BeginRank(const RankPlan& rank) = 0;
  // false: the format cannot represent the event (it is counted, not
  // written).
  virtual absl::StatusOr<bool> Event(const RankPlan& rank, const MergeEvent& event) = 0;
  // `metadata`: what the merge did (gpuctl.merge/1, docs/analyze.md).
  virtual absl::Status Finish(const Json& metadata) = 0;
};

// Chrome trace-event JSON on a base time `base_time_ns` (a whole second).
std::unique_ptr<MergeSink> NewJsonSink(MergeOutput* out, int64_t base_time_ns);
// Perfetto's protobuf trace format (TracePacket stream).
std::unique_ptr<MergeSink> NewProtoSink(MergeOutput* out);

}  // namespace gpuctl::merge

#endif  // GPUCTL_DAEMON_MERGE_MERGE_OUTPUT_H_
