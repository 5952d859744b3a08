#ifndef GPUCTL_DAEMON_CORE_LOCAL_STORE_H_
#define GPUCTL_DAEMON_CORE_LOCAL_STORE_H_

#include <atomic>
#include <memory>
#include <string>

#include "daemon/core/trace_store.h"

namespace gpuctl::daemon {

// A TraceStore on a local directory: <root>/<trace_id>/<name>.
//
// Files are written to a temporary name in the same directory, fsynced,
// renamed into place and the directory fsynced, so a reader or a crash
// never sees half a file. Temporary names start with ".tmp-", which no
// valid file name can, and leftovers are removed by Create().
//
// Trace ids must pass IsValidTraceId and file names must match
// [A-Za-z0-9._-]{1,255} without a leading dot, so no input can reach
// outside the root. Thread-safe: no mutable state besides an atomic counter.
class LocalTraceStore final : public TraceStore {
 public:
  // Creates `root` (mode 0750, parents included) when missing.
  static absl::StatusOr<std::unique_ptr<LocalTraceStore>> Create(const std::string& root);

  std::string Location(absl::string_view trace_id) const override;
  absl::Status PutFile(absl::string_view trace_id, absl::string_view name,
                       absl::string_view data) override;
  absl::Status PutManifest(const v1::TraceManifest& manifest) override;
  absl::StatusOr<v1::TraceManifest> GetManifest(absl::string_view trace_id) override;
  absl::StatusOr<v1::ListTracesResponse> List(const v1::ListTracesRequest& request) override;
  absl::StatusOr<std::unique_ptr<TraceFileReader>> Open(absl::string_view trace_id,
                                                        absl::string_view name) override;

  const std::string& root() const { return root_; }

 private:
  explicit LocalTraceStore(std::string root) : root_(std::move(root)) {}
  absl::Status WriteAtomically(const std::string& dir, absl::string_view name,
                               absl::string_view data);

  const std::string root_;
  std::atomic<uint64_t> temp_counter_{0};
};

// True for names a store accepts: [A-Za-z0-9._-]{1,255}, no leading dot.
bool IsValidStoreFileName(absl::string_view name);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_LOCAL_STORE_H_
