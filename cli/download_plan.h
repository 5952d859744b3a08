#ifndef GPUCTL_CLI_DOWNLOAD_PLAN_H_
#define GPUCTL_CLI_DOWNLOAD_PLAN_H_

// How the files several hosts stored for one trace share one directory
// under `gpuctl trace -o DIR`. Plain data in, plain data out: the names
// come from the daemons and are not trusted.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuctl::cli {

// What to fetch from one host and the names to save it under.
struct DownloadPlan {
  // Empty with one host: every file of the trace, names kept.
  std::vector<std::string> files;
  std::map<std::string, std::string> local_names;  // daemon's name -> saved name
  std::string error;  // the files cannot be saved under safe, distinct names
};

// What one host reported storing.
struct HostFiles {
  std::string name;                // the daemon's host name once it answered, else the target
  std::string target;              // as given on the command line
  std::vector<std::string> files;  // its processes' result files; "" for none
};

// One plan per host; nullopt for a host that stored no file. With one host
// everything is fetched as named. With several, every host's files share
// one directory: each host's manifest is saved as _gpuctl/<host>.json
// (gpuctl/v1/trace_layout.h) and a file whose name another host's file
// already took gets a
// "<host>-" prefix. <host> is the daemon's host name, or the target made
// safe when that name is not a safe file name or is not unique. A host
// whose files cannot all be saved under safe, distinct names gets a plan
// with `error` set.
std::vector<std::optional<DownloadPlan>> PlanDownloads(const std::vector<HostFiles>& hosts);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_DOWNLOAD_PLAN_H_
