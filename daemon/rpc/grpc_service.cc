#include "daemon/rpc/grpc_service.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/core/proto_time.h"
#include "daemon/core/token_scope.h"
#include "daemon/rpc/get_trace_reactor.h"
#include "daemon/rpc/raw_messages.h"
#include "daemon/rpc/status_util.h"
#include "daemon/rpc/trace_reactor.h"

namespace gpuctl::daemon {
namespace {

// Ends a server-streaming call at once with `status`.
class RejectedWriteReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RejectedWriteReactor(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

// One unary call, its request and response held typed; Reply serializes
// the response into gRPC's buffer and finishes. Deletes itself in OnDone.
template <typename Request, typename Response>
class UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  explicit UnaryCall(grpc::ByteBuffer* reply) : reply_(reply) {}

  // Once, from any thread.
  void Reply(const grpc::Status& status) {
    if (status.ok()) *reply_ = SerializeReply(response);
    Finish(status);
  }
  void OnDone() override { delete this; }

  Request request;
  Response response;

 private:
  grpc::ByteBuffer* const reply_;
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

void KeepInScope(const TokenScope& scope, v1::ListProcessesResponse* listed) {
  auto* processes = listed->mutable_processes();
  processes->erase(
      std::remove_if(processes->begin(), processes->end(),
                     [&](const v1::ProcessInfo& p) { return !ProcessInScope(scope, p); }),
      processes->end());
  listed->clear_rejected();
}

void KeepInScope(const TokenScope& scope, v1::ListTracesResponse* listed) {
  auto* traces = listed->mutable_traces();
  traces->erase(std::remove_if(traces->begin(), traces->end(),
                               [&](const v1::TraceManifest& m) {
                                 return !ManifestInScope(scope, m, m.trigger().token());
                               }),
                traces->end());
}

}  // namespace

grpc::Status GrpcService::Admit(const grpc::CallbackServerContext& context,
                                absl::string_view method, const grpc::ByteBuffer& bytes,
                                google::protobuf::Message* request,
                                const TokenScope** scope) const {
  if (scope != nullptr) *scope = nullptr;
  if (auth_ != nullptr) {
    if (grpc::Status auth = auth_->Check(context, scope); !auth.ok()) return auth;
  }
  return ToGrpcStatus(ParseRequest(method, bytes, request));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GrpcService::Trace(grpc::CallbackServerContext* context,
                                                               const grpc::ByteBuffer* bytes) {
  v1::TraceRequest request;
  const TokenScope* scope = nullptr;
  if (grpc::Status admitted = Admit(*context, "Trace", *bytes, &request, &scope); !admitted.ok()) {
    return new RejectedWriteReactor(admitted);
  }
  std::string caller = CallerName(*context);
  if (scope != nullptr) {
    absl::StrAppend(&caller, " with token \"", scope->name, "\"");
    if (absl::Status in = CheckSelectorInScope(*scope, request.selector()); !in.ok()) {
      LogInfo("trace refused", {{"caller", caller}, {"reason", in.message()}});
      return new RejectedWriteReactor(ToGrpcStatus(in));
    }
  }
  std::shared_ptr<TraceReactor> reactor = TraceReactor::Create(loop_);
  loop_->Post([this, reactor, request = std::move(request), caller = std::move(caller),
               token = scope != nullptr ? scope->name : std::string()] {
    reactor->StartOnLoop(core_, request, caller, token);
  });
  return reactor.get();
}

grpc::ServerUnaryReactor* GrpcService::ListProcesses(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  auto* call = new UnaryCall<v1::ListProcessesRequest, v1::ListProcessesResponse>(response);
  const TokenScope* scope = nullptr;
  if (grpc::Status admitted = Admit(*context, "ListProcesses", *request, &call->request, &scope);
      !admitted.ok()) {
    call->Reply(admitted);
    return call;
  }
  loop_->Post([this, call, scope] {
    absl::StatusOr<v1::ListProcessesResponse> listed = core_->ListProcesses(call->request);
    // A scoped token sees the processes inside its scope only, and none of
    // the refused attachments (they carry other users' command lines).
    if (listed.ok() && scope != nullptr) KeepInScope(*scope, &*listed);
    if (listed.ok()) call->response = std::move(*listed);
    call->Reply(ToGrpcStatus(listed.status()));
  });
  return call;
}

grpc::ServerUnaryReactor* GrpcService::GetStatus(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  auto* call = new UnaryCall<v1::GetStatusRequest, v1::GetStatusResponse>(response);
  if (grpc::Status admitted = Admit(*context, "GetStatus", *request, &call->request);
      !admitted.ok()) {
    call->Reply(admitted);
    return call;
  }
  loop_->Post([this, call] {
    call->response = core_->GetStatus();
    call->Reply(grpc::Status::OK);
  });
  return call;
}

grpc::ServerUnaryReactor* GrpcService::ProbeClock(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  // Read before the checks: the receipt, as close to the wire as the
  // service gets.
  const absl::Time now = clock_->Now();
  auto* call = new UnaryCall<v1::ProbeClockRequest, v1::ProbeClockResponse>(response);
  if (grpc::Status admitted = Admit(*context, "ProbeClock", *request, &call->request);
      !admitted.ok()) {
    call->Reply(admitted);
    return call;
  }
  *call->response.mutable_daemon_time() = ToProtoTimestamp(now);
  call->Reply(grpc::Status::OK);
  return call;
}

grpc::ServerUnaryReactor* GrpcService::GetSchedule(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  auto* call = new UnaryCall<v1::GetScheduleRequest, v1::GetScheduleResponse>(response);
  if (grpc::Status admitted = Admit(*context, "GetSchedule", *request, &call->request);
      !admitted.ok()) {
    call->Reply(admitted);
    return call;
  }
  loop_->Post([this, call] {
    const std::string host = core_->GetStatus().host();
    if (schedule_ != nullptr) {
      absl::StatusOr<v1::GetScheduleResponse> got = schedule_->GetSchedule(call->request);
      if (!got.ok()) return call->Reply(ToGrpcStatus(got.status()));
      call->response = *std::move(got);
    }
    call->response.set_host(host);
    if (schedule_ == nullptr || call->request.preview_job().empty()) {
      return call->Reply(grpc::Status::OK);
    }
    // A preview may hash many slots: not on the loop.
    auto preview = [call, task = schedule_->Preview(call->request)]() mutable {
      call->Reply(ToGrpcStatus(std::move(task)(call->response)));
    };
    if (io_ != nullptr) {
      io_->Run(std::move(preview));
    } else {
      preview();
    }
  });
  return call;
}

grpc::ServerUnaryReactor* GrpcService::ListTraces(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  auto* call = new UnaryCall<v1::ListTracesRequest, v1::ListTracesResponse>(response);
  const TokenScope* scope = nullptr;
  if (grpc::Status admitted = Admit(*context, "ListTraces", *request, &call->request, &scope);
      !admitted.ok()) {
    call->Reply(admitted);
    return call;
  }
  if (call->request.page_size() < 0 || call->request.page_size() > 1000) {
    call->Reply(
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "page_size must be between 0 and 1000"));
    return call;
  }
  auto run = [store = store_, call, scope] {
    absl::StatusOr<v1::ListTracesResponse> listed = store->List(call->request);
    // A scoped token lists the traces inside its scope only (a page may
    // then hold fewer than page_size; the page token still continues it).
    if (listed.ok() && scope != nullptr) KeepInScope(*scope, &*listed);
    if (listed.ok()) call->response = std::move(*listed);
    call->Reply(ToGrpcStatus(listed.status()));
  };
  // Listing may touch the disk or object storage: not on gRPC's threads.
  if (io_ != nullptr) {
    io_->Run(std::move(run));
  } else {
    run();
  }
  return call;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GrpcService::GetTrace(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes) {
  v1::GetTraceRequest request;
  const TokenScope* scope = nullptr;
  if (grpc::Status admitted = Admit(*context, "GetTrace", *bytes, &request, &scope);
      !admitted.ok()) {
    return new RejectedWriteReactor(admitted);
  }
  return new GetTraceReactor(store_, io_, request, scope);
}

}  // namespace gpuctl::daemon
