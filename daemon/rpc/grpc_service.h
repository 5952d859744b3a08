#ifndef GPUCTL_DAEMON_RPC_GRPC_SERVICE_H_
#define GPUCTL_DAEMON_RPC_GRPC_SERVICE_H_

#include "daemon/common/clock.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/schedule_reporter.h"
#include "daemon/rpc/bearer_token.h"
#include "daemon/store/trace_store.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpuctl::daemon {

// The generated service with every method taking and giving bytes.
using RawGpuctlService = v1::Gpuctl::WithRawCallbackMethod_Trace<
    v1::Gpuctl::WithRawCallbackMethod_ListProcesses<v1::Gpuctl::WithRawCallbackMethod_ListTraces<
        v1::Gpuctl::WithRawCallbackMethod_GetTrace<v1::Gpuctl::WithRawCallbackMethod_GetStatus<
            v1::Gpuctl::WithRawCallbackMethod_GetSchedule<
                v1::Gpuctl::WithRawCallbackMethod_ProbeClock<v1::Gpuctl::Service>>>>>>>;

// The gRPC adapter for gpuctl.v1.Gpuctl (callback API). Calls that touch
// the core hop onto `loop` and complete from there; ListTraces and GetTrace
// use the (thread-safe) store directly, GetTrace's reads on `io`.
//
// The methods are raw (see raw_messages.h): each parses its request
// itself, answering INVALID_ARGUMENT to bytes that are not one, and runs
// on the typed messages from there.
//
// Every pointer must outlive the grpc::Server this service is registered
// with, and `loop` must keep running until that server's Shutdown()
// returns: in-flight calls complete through it. The core is read only on
// the loop thread, so it may be set (set_core) after the server started,
// as long as that happens before the loop runs.
class GrpcService final : public RawGpuctlService {
 public:
  GrpcService(DaemonCore* core, TaskRunner* loop, TraceStore* store, Executor* io)
      : core_(core), loop_(loop), store_(store), io_(io) {}
  void set_core(DaemonCore* core) { core_ = core; }
  // Set: every call must carry the bearer token. Outlives the server; set
  // before it starts.
  void set_auth(const BearerTokenAuth* auth) { auth_ = auth; }
  // The schedule GetSchedule reports; null: none configured. Touched on
  // the loop only.
  void set_schedule(ScheduleReporter* schedule) { schedule_ = schedule; }
  // The clock ProbeClock answers with: the one the core stamps a trace
  // request's receipt with. Default: the real clock. Outlives the server;
  // set before it starts.
  void set_clock(Clock* clock) { clock_ = clock; }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Trace(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* ListProcesses(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListTraces(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GetTrace(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetSchedule(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  // Answered on the gRPC thread, at once: the loop's queue would add its
  // wait to the round trip the caller times.
  grpc::ServerUnaryReactor* ProbeClock(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

 private:
  // The bearer token's check, then the request's parse. `scope`, when
  // given, is set to the scope of a scoped token (auth.tokens), else null.
  grpc::Status Admit(const grpc::CallbackServerContext& context, absl::string_view method,
                     const grpc::ByteBuffer& bytes, google::protobuf::Message* request,
                     const TokenScope** scope = nullptr) const;

  DaemonCore* core_;
  TaskRunner* const loop_;
  TraceStore* const store_;
  Executor* const io_;
  const BearerTokenAuth* auth_ = nullptr;
  ScheduleReporter* schedule_ = nullptr;
  RealClock real_clock_;
  Clock* clock_ = &real_clock_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_GRPC_SERVICE_H_
