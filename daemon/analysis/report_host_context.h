#ifndef GPUCTL_DAEMON_ANALYSIS_REPORT_HOST_CONTEXT_H_
#define GPUCTL_DAEMON_ANALYSIS_REPORT_HOST_CONTEXT_H_

#include "daemon/analysis/host_context.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis {

// A trace's "host_context" member of the --json document (docs/analyze.md):
// null when the trace has no host context.
nlohmann::json HostContextJson(const HostContext& host);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_REPORT_HOST_CONTEXT_H_
