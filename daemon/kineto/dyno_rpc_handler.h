#ifndef GPUCTL_DAEMON_KINETO_DYNO_RPC_HANDLER_H_
#define GPUCTL_DAEMON_KINETO_DYNO_RPC_HANDLER_H_

#include <string>

#include "absl/strings/string_view.h"
#include "daemon/core/daemon_core.h"

namespace gpuctl::daemon {

// dynolog's JSON RPC, as `dyno status`, `dyno version` and `dyno gputrace`
// speak it, answered from the daemon core:
//   {"fn": "getStatus"}  -> {"status": 1}
//   {"fn": "getVersion"} -> {"version": "<gpuctld's>"}
//   {"fn": "setKinetOnDemandRequest", "config": "KEY=VALUE\n...",
//    "job_id": J, "pids": [...], "process_limit": N}
//     -> {"processesMatched": [pids], "activityProfilersTriggered": [pids],
//         "activityProfilersBusy": n, "eventProfilersTriggered": [],
//         "eventProfilersBusy": 0, "traceId": "<gpuctl trace id>", ...}
// A trace request selects like dynolog: the processes of job J (J 0: those
// with no job id), narrowed to `pids` and their descendants unless pids is
// empty or [0], workers only, at most `process_limit` triggered (default
// 1000); the config keeps only the keys ParseDynoConfig takes. The trace is
// stored like any other (`gpuctl get <traceId>`); the reply does not wait
// for it. Anything malformed gets a reply with "status": "failed: <why>"
// (and empty lists, which dyno reads as "no processes matched").
//
// Threading: Handle runs on the core's event-loop thread.
class DynoRpcHandler {
 public:
  DynoRpcHandler(DaemonCore* core, std::string daemon_version)
      : core_(core), daemon_version_(std::move(daemon_version)) {}

  // One request body -> one response body (JSON text).
  std::string Handle(absl::string_view body);

 private:
  DaemonCore* core_;
  std::string daemon_version_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_KINETO_DYNO_RPC_HANDLER_H_
