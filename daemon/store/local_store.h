#ifndef GPUCTL_DAEMON_STORE_LOCAL_STORE_H_
#define GPUCTL_DAEMON_STORE_LOCAL_STORE_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/common/clock.h"
#include "daemon/store/retention.h"
#include "daemon/store/store_index.h"
#include "daemon/store/trace_store.h"

namespace gpuctl::daemon {

inline constexpr char kDefaultStoreDir[] = "/var/lib/gpuctl/traces";

struct LocalStoreOptions {
  RetentionPolicy retention;
  // Wall clock for max_age; a real clock when null. Not owned.
  Clock* clock = nullptr;
  // Deletes, at startup, every trace that has files but no manifest. For
  // the daemon, the store's only writer: such a trace was being written or
  // deleted when a previous run died, and will never be completed. Left off
  // by tools that build one trace over several runs.
  bool remove_incomplete = false;
  // The daemon's host name: the store writes its manifests as
  // _gpuctl/<host>.json (gpuctl/v1/trace_layout.h), the host made safe by
  // TraceFileHost.
  std::string host;
};

// A TraceStore on a local directory: <root>/<trace_id>/<name>, in the
// layout of gpuctl/v1/trace_layout.h: process traces at the top, the
// manifest at _gpuctl/<host>.json. A trace written with the old top-level
// manifest.json is read (and listed, served, deleted) as well; writing its
// manifest again moves it to the new place. Open serves the trace's
// manifest, in either layout, under ManifestName() and "manifest.json"
// (another host's "_gpuctl/<h>.json" only as named), and the index lists
// it as kManifestFileName.
//
// Crash safety. Files are written to a temporary name in the trace's
// directory, fsynced, renamed into place and the directory fsynced; a new
// trace directory is fsynced in the root. So a reader or a crash never sees
// half a file. Temporary names start with ".tmp-", which no valid file name
// can; Create() removes leftovers. The manifest is written last, so a trace
// with a manifest has all its files, and deleted first (then fsynced), so a
// deletion cut short leaves a trace without a manifest: never listed, and
// removed at the next start with `remove_incomplete`.
//
// Index. Create() scans the store once (reading every manifest for its job
// id); from then on listing, filtering and retention use the in-memory
// index, kept up to date by this store's writes and deletions. The store
// must be the directory's only writer while it is open.
//
// Retention (LocalStoreOptions::retention) deletes complete traces, oldest
// first among those it may delete, after each PutManifest and on
// EnforceRetention(); never a trace in progress, pinned (by Pin(), an open
// reader or a write in progress), or awaiting upload. max_count counts the
// complete traces, max_bytes every file; max_age goes by the time in the
// trace id. The awaiting-upload mark is an empty ".awaiting-upload" file in
// the trace's directory.
//
// Trace ids must pass IsValidTraceId and file names must match
// [A-Za-z0-9._-]{1,255} without a leading dot, so no input can reach
// outside the root. Thread-safe.
class LocalTraceStore final : public TraceStore {
 public:
  // Creates `root` (mode 0750, parents included) when missing, removes
  // temporary files (and, with `remove_incomplete`, incomplete traces) and
  // indexes the store, on the calling thread.
  static absl::StatusOr<std::unique_ptr<LocalTraceStore>> Create(
      const std::string& root, const LocalStoreOptions& options = {});

  std::string Location(absl::string_view trace_id) const override;
  std::string ManifestName() const override { return manifest_name_; }
  absl::Status PutFile(absl::string_view trace_id, absl::string_view name,
                       absl::string_view data) override;
  absl::Status PutManifest(const v1::TraceManifest& manifest) override;
  absl::StatusOr<v1::TraceManifest> GetManifest(absl::string_view trace_id) override;
  absl::StatusOr<v1::ListTracesResponse> List(const v1::ListTracesRequest& request) override;
  absl::StatusOr<std::unique_ptr<TraceFileReader>> Open(absl::string_view trace_id,
                                                        absl::string_view name) override;
  absl::StatusOr<TracePin> Pin(absl::string_view trace_id) override;
  absl::Status SetAwaitingUpload(absl::string_view trace_id, bool awaiting) override;
  size_t EnforceRetention() override;

  // Deletes a trace now, complete or in progress. FAILED_PRECONDITION when
  // it is pinned or awaiting upload, NOT_FOUND when unknown.
  absl::Status Delete(absl::string_view trace_id);
  // Deletes a complete trace's data files but keeps its manifest, so the
  // trace stays listed (its files now live elsewhere). FAILED_PRECONDITION
  // while it is awaiting upload or in progress, NOT_FOUND when unknown.
  // Open readers keep reading what they opened.
  absl::Status RemoveDataFiles(absl::string_view trace_id);
  // What the index holds for one trace; nullopt when unknown.
  std::optional<StoredTrace> Find(absl::string_view trace_id) const;
  StoreTotals Totals() const;
  // Traces retention deleted since the store was opened.
  uint64_t retention_deletions() const { return retention_deletions_.load(); }
  // Traces marked awaiting upload, oldest first (after a restart too).
  std::vector<std::string> AwaitingUpload() const;

  const std::string& root() const { return root_; }
  const RetentionPolicy& retention() const { return retention_; }

 private:
  LocalTraceStore(std::string root, const LocalStoreOptions& options);
  absl::Status Scan(bool remove_incomplete);
  absl::Status EnsureTraceDir(absl::string_view trace_id);
  // The path of the trace's manifest, whichever layout wrote it; NOT_FOUND
  // ("no trace <id>") without one.
  absl::StatusOr<std::string> FindManifest(absl::string_view trace_id) const;
  // Removes the manifest first (fsynced), then the rest and the directory.
  // An error before the manifest is gone leaves the trace whole.
  absl::Status RemoveTraceFiles(absl::string_view trace_id, bool* manifest_gone);
  absl::Status SetAwaitingMark(absl::string_view trace_id, bool awaiting);
  // One retention pass; returns the traces evicted.
  size_t EvictOnce();

  const std::string root_;
  const std::string manifest_name_;  // "_gpuctl/<host>.json"
  const RetentionPolicy retention_;
  RealClock real_clock_;
  Clock* const clock_;
  // Shared with the pins and readers, which may outlive the store.
  const std::shared_ptr<StoreIndex> index_ = std::make_shared<StoreIndex>();
  // Keeps a trace's awaiting-upload mark on disk and in the index in step.
  // std::mutex rather than absl::Mutex here and below: ThreadSanitizer sees
  // pthread locks, not those inside an uninstrumented libabsl.
  std::mutex mark_mu_;
  // Held by the one retention pass running; see EnforceRetention.
  std::mutex enforce_mu_;
  std::atomic<bool> enforce_requested_{false};
  std::atomic<uint64_t> retention_deletions_{0};
};

// True for names a store accepts: [A-Za-z0-9._-]{1,255}, no leading dot.
bool IsValidStoreFileName(absl::string_view name);

// A manifest as stored, locally and in a bucket, and as `gpuctl traces
// --json` prints it: protobuf's JSON mapping (lowerCamelCase keys) with
// every field, zero values included, so that rank 0 says "rank": 0
// (docs/trace-format.md). Readers accept the .proto names too, as older
// stores wrote them.
absl::StatusOr<std::string> EncodeManifest(const v1::TraceManifest& manifest);

// The empty file marking a trace awaiting upload (see SetAwaitingUpload).
inline constexpr absl::string_view kAwaitingUploadMark = ".awaiting-upload";

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_STORE_LOCAL_STORE_H_
