#ifndef GPUCTL_CLI_TRACE_DOWNLOAD_H_
#define GPUCTL_CLI_TRACE_DOWNLOAD_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/cancel_group.h"
#include "cli/download.h"
#include "cli/trace_fanout.h"

namespace gpuctl::cli {

// What to fetch from one host and the names to save it under.
struct DownloadPlan {
  // Empty with one host: every file of the trace, names kept.
  std::vector<std::string> files;
  std::map<std::string, std::string> local_names;  // daemon's name -> saved name
  std::string error;  // the files cannot be saved under safe, distinct names
};

// One plan per host; nullopt for a host that stored no file. With one host
// everything is fetched as named. With several, every host's files share
// one directory: each host's manifest.json becomes <host>.manifest.json
// and a file whose name another host's file already took gets a
// "<host>-" prefix. <host> is the daemon's host name, or the target made
// safe when that name is not a safe file name or is not unique.
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
};

// Fetches every planned host's files into <output_root>/<trace_id>/, at
// most `parallel` hosts at once. One entry per host, in order.
std::vector<HostDownload> DownloadFleetTrace(const std::vector<HostTrace>& hosts,
                                             const FleetDownloadOptions& options,
                                             CancelGroup& cancel);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_TRACE_DOWNLOAD_H_
