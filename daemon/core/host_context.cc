#include "daemon/core/host_context.h"

#include <utility>

namespace gpuctl::daemon {

bool IsHostActivity(absl::string_view name) {
  return name == kHostActivityCpu || name == kHostActivitySched;
}

HostContextWanted HostContextOf(const v1::TraceRequest& request) {
  HostContextWanted wanted;
  for (const std::string& name : request.activities()) {
    wanted.samples |= name == kHostActivityCpu;
    wanted.switches |= name == kHostActivitySched;
  }
  wanted.dwarf = wanted.samples && request.host_unwind() == v1::HOST_UNWIND_DWARF;
  return wanted;
}

std::vector<std::string> GpuActivitiesOf(const v1::TraceRequest& request) {
  std::vector<std::string> out;
  for (const std::string& name : request.activities()) {
    if (!IsHostActivity(name)) out.push_back(name);
  }
  return out;
}

v1::HostContextResult HostContextUnavailable(std::string reason) {
  v1::HostContextResult result;
  result.set_state(v1::HostContextResult::STATE_UNAVAILABLE);
  result.set_reason(std::move(reason));
  return result;
}

}  // namespace gpuctl::daemon
