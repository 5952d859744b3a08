#ifndef GPUCTL_CLI_DOWNLOAD_H_
#define GPUCTL_CLI_DOWNLOAD_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/cancel_group.h"
#include "cli/download_paths.h"  // IsSafeName
#include "gpuctl/v1/service.grpc.pb.h"

namespace gpuctl::cli {

struct DownloadedFile {
  std::string name;  // as saved (see DownloadOptions::local_names)
  uint64_t size = 0;
};

struct DownloadResult {
  std::string directory;  // <output_root>/<trace_id>
  std::vector<DownloadedFile> files;
  // How the trace ended, as the daemon's first chunk said (UNSPECIFIED from
  // an older daemon); `cancellation` when it was cancelled.
  v1::TraceStatus trace_status = v1::TRACE_STATUS_UNSPECIFIED;
  v1::TraceCancellation cancellation;
};

struct DownloadOptions {
  std::string trace_id;
  // Empty: every file of the trace, manifest.json included.
  std::vector<std::string> files;
  // Names to save files under, by the daemon's name (several hosts' files
  // share one directory); a file not listed keeps its name. Every name
  // must be safe (IsSafeName).
  std::map<std::string, std::string> local_names;
  std::string output_root;
  // The trace as the daemon's bucket holds it: every host's part
  // (GetTraceRequest.bucket).
  bool bucket = false;
  absl::Duration timeout = absl::Minutes(30);
  // Optional; cancelling the group cancels the transfer.
  CancelGroup* cancel = nullptr;
  // Optional; called after each chunk is written with the files completed
  // and the bytes written so far.
  std::function<void(size_t files_done, uint64_t bytes_done)> on_progress;
};

// Streams the trace's files with GetTrace into <output_root>/<trace_id>/.
// Every file is written to a hidden temporary beside its final name and
// renamed once complete, so a reader never sees half a file. Chunks are
// checked: safe names, requested names only, contiguous offsets, a size that
// does not change, nothing past the announced size, every file complete.
// Daemon errors come back marked by FromRpcStatus (NOT_FOUND for an unknown
// trace); local and validation failures are plain statuses, after which no
// temporary is left behind (files completed before the failure stay).
// CANCELLED when interrupted.
absl::StatusOr<DownloadResult> DownloadTrace(v1::Gpuctl::StubInterface& stub,
                                             const DownloadOptions& options);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_DOWNLOAD_H_
