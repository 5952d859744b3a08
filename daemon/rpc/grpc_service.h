#ifndef GPUCTL_DAEMON_RPC_GRPC_SERVICE_H_
#define GPUCTL_DAEMON_RPC_GRPC_SERVICE_H_

#include "daemon/common/task_runner.h"
#include "daemon/core/daemon_core.h"
#include "daemon/rpc/bearer_token.h"
#include "daemon/store/trace_store.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpuctl::daemon {

// The gRPC adapter for gpuctl.v1.Gpuctl (callback API). Calls that touch
// the core hop onto `loop` and complete from there; ListTraces and GetTrace
// use the (thread-safe) store directly, GetTrace's reads on `io`.
//
// Every pointer must outlive the grpc::Server this service is registered
// with, and `loop` must keep running until that server's Shutdown()
// returns: in-flight calls complete through it. The core is read only on
// the loop thread, so it may be set (set_core) after the server started,
// as long as that happens before the loop runs.
class GrpcService final : public v1::Gpuctl::CallbackService {
 public:
  GrpcService(DaemonCore* core, TaskRunner* loop, TraceStore* store, Executor* io)
      : core_(core), loop_(loop), store_(store), io_(io) {}
  void set_core(DaemonCore* core) { core_ = core; }
  // Set: every call must carry the bearer token. Outlives the server; set
  // before it starts.
  void set_auth(const BearerTokenAuth* auth) { auth_ = auth; }

  grpc::ServerWriteReactor<v1::TraceEvent>* Trace(grpc::CallbackServerContext* context,
                                                  const v1::TraceRequest* request) override;
  grpc::ServerUnaryReactor* ListProcesses(grpc::CallbackServerContext* context,
                                          const v1::ListProcessesRequest* request,
                                          v1::ListProcessesResponse* response) override;
  grpc::ServerUnaryReactor* ListTraces(grpc::CallbackServerContext* context,
                                       const v1::ListTracesRequest* request,
                                       v1::ListTracesResponse* response) override;
  grpc::ServerWriteReactor<v1::TraceChunk>* GetTrace(grpc::CallbackServerContext* context,
                                                     const v1::GetTraceRequest* request) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;

 private:
  grpc::Status Authenticate(const grpc::CallbackServerContext& context) const;

  DaemonCore* core_;
  TaskRunner* const loop_;
  TraceStore* const store_;
  Executor* const io_;
  const BearerTokenAuth* auth_ = nullptr;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_GRPC_SERVICE_H_
