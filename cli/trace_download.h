#ifndef GPUCTL_CLI_TRACE_DOWNLOAD_H_
#define GPUCTL_CLI_TRACE_DOWNLOAD_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/cancel_group.h"
#include "cli/download.h"
#include "cli/download_plan.h"
#include "cli/trace_fanout.h"
#include "cli/trace_progress.h"

namespace gpuctl::cli {

// PlanDownloads (download_plan.h) of what each host's Trace stream
// reported: its daemon's host name, its target and its results' files.
std::vector<std::optional<DownloadPlan>> PlanDownloads(const std::vector<HostTrace>& hosts);

// How one host's download went.
struct HostDownload {
  bool attempted = false;
  std::map<std::string, std::string> local_names;
  std::vector<DownloadedFile> files;  // as saved
  absl::Status status;
};

struct FleetDownloadOptions {
  std::string trace_id;
  std::string output_root;
  size_t parallel = 64;
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration transfer_timeout = absl::Minutes(30);
  ChannelSecurity security;
  // Optional; told of each planned host's download (hosts index `hosts`).
  DownloadProgress* progress = nullptr;
};

// Fetches every planned host's files into <output_root>/<trace_id>/, at
// most `parallel` hosts at once. One entry per host, in order.
std::vector<HostDownload> DownloadFleetTrace(const std::vector<HostTrace>& hosts,
                                             const FleetDownloadOptions& options,
                                             CancelGroup& cancel);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_TRACE_DOWNLOAD_H_
