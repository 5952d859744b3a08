#ifndef GPUCTL_DAEMON_RPC_CALL_COUNTER_H_
#define GPUCTL_DAEMON_RPC_CALL_COUNTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/server_interceptor.h"

namespace gpuctl::daemon {

// Told of every gRPC call the server answers: its full method name
// ("/gpuctl.v1.Gpuctl/Trace", or whatever the client asked for) and the
// status code sent. Called on gRPC's threads; must not block.
using CallDone = std::function<void(absl::string_view full_method, absl::StatusCode code)>;

// A server interceptor factory that reports each call's status as it is
// sent, for every service of the server (ServerBuilder::experimental()
// .SetInterceptorCreators). A call cancelled before its status is sent is
// not reported.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeCallCounter(
    CallDone done);

// The methods `services` (full names, "gpuctl.v1.Gpuctl") declare in the
// process's generated descriptor pool, as "/service/Method"; a service not
// in the pool adds none.
std::vector<std::string> ServedMethods(const std::vector<std::string>& services);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_CALL_COUNTER_H_
