#include "daemon/rpc/grpc_service.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/rpc/get_trace_reactor.h"
#include "daemon/rpc/status_util.h"
#include "daemon/rpc/trace_reactor.h"

namespace gpuctl::daemon {
namespace {

// Ends a server-streaming call at once with `status`.
template <typename T>
class RejectedWriteReactor final : public grpc::ServerWriteReactor<T> {
 public:
  explicit RejectedWriteReactor(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

// The client as gpuctld knows it: its address ("ipv4:10.0.0.5:51234"),
// with the name its certificate proves when mutual TLS authenticated it.
std::string CallerName(const grpc::CallbackServerContext& context) {
  constexpr size_t kMaxIdentity = 256;
  std::string name = context.peer();
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    const std::vector<grpc::string_ref> identity = auth->GetPeerIdentity();
    if (!identity.empty()) {
      absl::StrAppend(
          &name, " (",
          absl::string_view(identity[0].data(), std::min(identity[0].size(), kMaxIdentity)), ")");
    }
  }
  return name;
}

}  // namespace

grpc::Status GrpcService::Authenticate(const grpc::CallbackServerContext& context) const {
  return auth_ == nullptr ? grpc::Status::OK : auth_->Check(context);
}

grpc::ServerWriteReactor<v1::TraceEvent>* GrpcService::Trace(grpc::CallbackServerContext* context,
                                                             const v1::TraceRequest* request) {
  if (grpc::Status auth = Authenticate(*context); !auth.ok()) {
    return new RejectedWriteReactor<v1::TraceEvent>(auth);
  }
  std::shared_ptr<TraceReactor> reactor = TraceReactor::Create(loop_);
  loop_->Post([this, reactor, request = *request, caller = CallerName(*context)] {
    reactor->StartOnLoop(core_, request, caller);
  });
  return reactor.get();
}

grpc::ServerUnaryReactor* GrpcService::ListProcesses(grpc::CallbackServerContext* context,
                                                     const v1::ListProcessesRequest* request,
                                                     v1::ListProcessesResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = Authenticate(*context); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  // request and response stay valid until Finish.
  loop_->Post([this, reactor, request, response] {
    absl::StatusOr<v1::ListProcessesResponse> listed = core_->ListProcesses(*request);
    if (listed.ok()) *response = std::move(*listed);
    reactor->Finish(ToGrpcStatus(listed.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcService::GetStatus(grpc::CallbackServerContext* context,
                                                 const v1::GetStatusRequest* request,
                                                 v1::GetStatusResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = Authenticate(*context); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  loop_->Post([this, reactor, response] {
    *response = core_->GetStatus();
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcService::ListTraces(grpc::CallbackServerContext* context,
                                                  const v1::ListTracesRequest* request,
                                                  v1::ListTracesResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = Authenticate(*context); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  if (request->page_size() < 0 || request->page_size() > 1000) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "page_size must be between 0 and 1000"));
    return reactor;
  }
  auto run = [store = store_, reactor, request, response] {
    absl::StatusOr<v1::ListTracesResponse> listed = store->List(*request);
    if (listed.ok()) *response = std::move(*listed);
    reactor->Finish(ToGrpcStatus(listed.status()));
  };
  // Listing may touch the disk or object storage: not on gRPC's threads.
  if (io_ != nullptr) {
    io_->Run(std::move(run));
  } else {
    run();
  }
  return reactor;
}

grpc::ServerWriteReactor<v1::TraceChunk>* GrpcService::GetTrace(
    grpc::CallbackServerContext* context, const v1::GetTraceRequest* request) {
  if (grpc::Status auth = Authenticate(*context); !auth.ok()) {
    return new RejectedWriteReactor<v1::TraceChunk>(auth);
  }
  return new GetTraceReactor(store_, io_, *request);
}

}  // namespace gpuctl::daemon
