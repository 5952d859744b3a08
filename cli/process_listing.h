#ifndef GPUCTL_CLI_PROCESS_LISTING_H_
#define GPUCTL_CLI_PROCESS_LISTING_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/cancel_group.h"
#include "cli/connection.h"
#include "cli/host_list.h"
#include "cli/host_status.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::cli {

// One host's answer to ListProcesses.
struct HostProcesses {
  std::string target;
  HostStatus status = HostStatus::kOk;  // kOk, or why there is no answer
  std::string error;
  v1::ListProcessesResponse response;
};

// ListProcesses(selector, include_rejected) on every host, at most
// `parallel` at once, each within `timeout` for connecting and answering.
// Hosts whose entry carries an error are not contacted (unreachable).
// Cancelling `cancel` ends the calls in flight and skips the rest
// (kCancelled).
std::vector<HostProcesses> ListProcessesOnHosts(const std::vector<HostEntry>& hosts,
                                                const v1::ProcessSelector& selector,
                                                size_t parallel, absl::Duration timeout,
                                                CancelGroup& cancel, bool include_rejected = false,
                                                const ChannelSecurity& security = {});

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_PROCESS_LISTING_H_
