#ifndef GPUCTL_DAEMON_STORE_TRACE_FILE_NAME_H_
#define GPUCTL_DAEMON_STORE_TRACE_FILE_NAME_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// The one place that names a process's trace file inside a trace:
// "<host>-rank<r>-pid<p>.json.gz", r = -1 when the rank is unknown. The
// local store, the bucket layout and the sweep of orphaned uploads all go
// through these functions.

// The host as it appears in file names: reduced to [A-Za-z0-9.-] (other
// bytes become '-', a leading dot too), at most 128 bytes, "unknown" when
// empty, so every name made from it is a valid store file name.
std::string TraceFileHost(absl::string_view host);

std::string TraceFileName(absl::string_view host, int32_t rank, int32_t pid);

// True when `file` is exactly a trace file name of `host` (any rank and
// pid): host "node" does not claim "node-1-rank0-pid7.json.gz" of host
// "node-1".
bool IsTraceFileOfHost(absl::string_view file, absl::string_view host);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_STORE_TRACE_FILE_NAME_H_
