#ifndef GPUCTL_DAEMON_STORE_STORE_INDEX_H_
#define GPUCTL_DAEMON_STORE_STORE_INDEX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"
#include "daemon/store/retention.h"

namespace gpuctl::daemon {

// One stored trace as the index knows it.
struct StoredTrace {
  std::string trace_id;
  absl::Time created;  // embedded in the id (UUIDv7)
  // From the manifest; empty while the trace is in progress.
  std::string job_id;
  // The manifest is written: the trace is listed and may be evicted.
  bool complete = false;
  bool awaiting_upload = false;
  // Every file of the trace, the manifest included.
  uint64_t total_bytes = 0;
  // (name, bytes), sorted by name; the manifest included.
  std::vector<std::pair<std::string, uint64_t>> files;
  // Readers and writers holding the trace (Find fills it in).
  int pins = 0;
};

// Totals over the traces not being deleted.
struct StoreTotals {
  uint64_t traces = 0;  // complete or in progress
  uint64_t complete = 0;
  uint64_t bytes = 0;
  uint64_t awaiting_upload = 0;
};

// A trace retention chose; it is being deleted.
struct Eviction {
  std::string trace_id;
  EvictionReason reason;
  absl::Time created;
  uint64_t bytes = 0;
};

// The in-memory index of a trace store, ordered by trace id, which is
// creation order: listing, filtering by job and retention never touch the
// disk. It does no I/O itself; the store keeps it in step with the disk.
//
// A trace is "being deleted" from TakeEvictions/TakeForDelete until
// FinishDelete/AbortDelete: it is no longer listed nor counted, cannot be
// pinned, and writers wait for the deletion to end.
//
// Thread-safe.
class StoreIndex {
 public:
  // Adds (or replaces) a trace found on disk. `files` need not be sorted;
  // `total_bytes` and `pins` are ignored (computed).
  void Add(StoredTrace trace);
  // Records that the trace's directory exists, in progress if new.
  void AddTrace(absl::string_view trace_id, absl::Time created);
  // Records that `name` (not the manifest) now holds `bytes`.
  void RecordFile(absl::string_view trace_id, absl::Time created, absl::string_view name,
                  uint64_t bytes);
  // Records a written manifest of `bytes`: the trace is complete.
  void RecordManifest(absl::string_view trace_id, absl::Time created, absl::string_view job_id,
                      uint64_t bytes);
  // Records that `name` is gone from a trace that stays (its data files
  // removed once copied elsewhere). False when the trace or file is unknown.
  bool ForgetFile(absl::string_view trace_id, absl::string_view name);
  // False when the trace is unknown.
  bool SetAwaitingUpload(absl::string_view trace_id, bool awaiting);

  // Pins are counted per id, known or not. False, and no pin taken, while
  // the trace is being deleted.
  bool Pin(absl::string_view trace_id);
  // For writers: waits while the trace is being deleted, then pins it.
  void PinForWrite(absl::string_view trace_id);
  void Unpin(absl::string_view trace_id);

  // Up to `limit` ids of complete traces, newest first, older than `after`
  // when it is not empty, of job `job_id` when that is not empty.
  std::vector<std::string> Page(absl::string_view after, absl::string_view job_id,
                                size_t limit) const;

  // The traces `policy` evicts at `now`, oldest first, now being deleted.
  // Never one in progress, pinned, or awaiting upload.
  std::vector<Eviction> TakeEvictions(const RetentionPolicy& policy, absl::Time now);
  // Starts deleting one trace, complete or in progress. NOT_FOUND when
  // unknown or already being deleted; FAILED_PRECONDITION when pinned or
  // awaiting upload.
  absl::Status TakeForDelete(absl::string_view trace_id);
  // The trace's files are gone: forgets it.
  void FinishDelete(absl::string_view trace_id);
  // The trace is still whole on disk: back to normal.
  void AbortDelete(absl::string_view trace_id);

  std::optional<StoredTrace> Find(absl::string_view trace_id) const;
  StoreTotals Totals() const;
  // Traces marked awaiting upload, oldest first.
  std::vector<std::string> AwaitingUpload() const;

 private:
  struct Entry {
    absl::Time created;
    std::string job_id;
    bool complete = false;
    bool awaiting_upload = false;
    bool deleting = false;
    uint64_t bytes = 0;
    std::vector<std::pair<std::string, uint64_t>> files;  // sorted by name
  };
  using Traces = absl::btree_map<std::string, Entry>;

  Entry& FindOrAdd(absl::string_view trace_id, absl::Time created)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetFile(Entry& entry, absl::string_view name, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds (sign +1) or removes (-1) an entry's share of the totals and its
  // place in the job index.
  void Account(const std::string& trace_id, const Entry& entry, int sign)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsPinned(absl::string_view trace_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsDeleting(absl::string_view trace_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // gpuctl::Mutex rather than absl::Mutex: ThreadSanitizer sees pthread
  // locks, not the ones inside an uninstrumented libabsl (docs/testing.md).
  mutable Mutex mu_;
  // Signalled whenever a trace stops being deleted (PinForWrite waits).
  CondVar delete_done_cv_;
  Traces traces_ ABSL_GUARDED_BY(mu_);
  // (job id, trace id) of the complete traces not being deleted.
  absl::btree_set<std::pair<std::string, std::string>> by_job_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> pins_ ABSL_GUARDED_BY(mu_);
  StoreTotals totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_STORE_STORE_INDEX_H_
