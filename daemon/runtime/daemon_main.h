#ifndef GPUCTL_DAEMON_RUNTIME_DAEMON_MAIN_H_
#define GPUCTL_DAEMON_RUNTIME_DAEMON_MAIN_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/common/clock.h"
#include "daemon/common/event_loop.h"
#include "daemon/common/thread_pool_executor.h"
#include "daemon/config/daemon_options.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/peer_router.h"
#include "daemon/hostctx/host_context_service.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/kineto/dyno_rpc.h"
#include "daemon/kineto/dyno_rpc_handler.h"
#include "daemon/kineto/kineto_bridge.h"
#include "daemon/kineto/kineto_procfs.h"
#include "daemon/kineto/kineto_server.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/rpc/grpc_service.h"
#include "daemon/rpc/reflection_v1_service.h"
#include "daemon/s3/s3_trace_store.h"
#include "daemon/scheduler/schedule_driver.h"
#include "daemon/store/trace_store.h"
#include "grpcpp/grpcpp.h"

namespace gpuctl::daemon {

// A running gpuctld: the event loop on its own thread, the core, the IPC
// server and the gRPC server, wired together. Start() returns once both
// servers accept connections (and the ready file, if any, is written).
// The gRPC server also serves grpc.health.v1.Health (SERVING from then
// until Shutdown begins, NOT_SERVING before and after), server reflection
// v1 and, where gRPC's reflection library is available, v1alpha.
class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const DaemonOptions& options);
  // Shuts down if Shutdown() was not called.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Graceful stop: ends the gRPC calls (cancelling running traces through
  // the core), closes IPC connections, drains the workers. Idempotent; not
  // from the loop thread.
  void Shutdown();

  // "127.0.0.1:41234": the address the gRPC server is bound to.
  const std::string& grpc_address() const { return grpc_address_; }
  // "127.0.0.1:9464": where /metrics is served; empty when metrics are off.
  std::string metrics_address() const {
    return metrics_server_ == nullptr ? "" : metrics_server_->address();
  }

 private:
  Daemon() = default;
  absl::Status Init(const DaemonOptions& options);
  // The host context service and the core's view of it; on failure the
  // daemon runs without (traces asking for it say so).
  void StartHostContext(const hostctx::RecorderOptions& recorder, const CoreOptions& core_options);
  absl::Status StartGrpc(const DaemonOptions& options);
  // The local store, or with options.s3 the S3 store spooling in it.
  absl::Status OpenStore(const DaemonOptions& options);
  // dynolog's RPC, when configured; a port already taken is a warning.
  void StartDynoRpc(const DaemonOptions& options);
  // Binds libkineto's sockets as kineto.mode says (before the core exists);
  // StartKineto then puts the bridge in front of the core.
  absl::Status CreateKinetoServer(const DaemonOptions& options);
  absl::Status StartKineto(const DaemonOptions& options);
  // grpc.health.v1 status of the server and of gpuctl.v1.Gpuctl.
  void SetServing(bool serving);

  RealClock clock_;
  // The schedule's clock: clock_ shifted by options.clock_offset.
  std::unique_ptr<OffsetClock> schedule_clock_;
  // With metrics.listen: outlives every component that counts into it.
  std::unique_ptr<metrics::DaemonMetrics> metrics_;
  // options.host_name, else the system's: the one name the core and the
  // store are given.
  std::string host_name_;
  std::unique_ptr<EventLoop> loop_;
  std::thread loop_thread_;
  std::unique_ptr<ThreadPoolExecutor> worker_;
  // Scheduled traces' conversion, at low priority; only with a schedule.
  std::unique_ptr<ThreadPoolExecutor> background_worker_;
  std::unique_ptr<TraceStore> store_;
  // The local store inside store_ (store_ itself, or the S3 store's spool).
  LocalTraceStore* local_store_ = nullptr;
  // store_ when it is an S3 store: its flush begins with Shutdown and ends
  // after the workers.
  s3::S3TraceStore* s3_store_ = nullptr;
  std::unique_ptr<IpcServer> ipc_;
  // The core's channel: the IPC server and the kineto bridge behind it.
  PeerRouter peers_;
  std::unique_ptr<kineto::KinetoServer> kineto_server_;
  std::unique_ptr<kineto::ProcfsKinetoReader> kineto_proc_;
  std::unique_ptr<kineto::KinetoBridge> kineto_;
  // Host context (activities cpu / sched); null when it could not start.
  std::unique_ptr<hostctx::HostContextService> host_context_;
  std::unique_ptr<HostContextSource> host_context_source_;
  std::unique_ptr<DaemonCore> core_;
  // Set with kineto.dyno_rpc_listen; the server lives on the loop thread,
  // the handler outlives it.
  std::unique_ptr<DynoRpcHandler> dyno_handler_;
  std::unique_ptr<DynoRpcServer> dyno_rpc_;
  // Set with a schedule; lives on the loop thread.
  std::unique_ptr<scheduler::ScheduleDriver> schedule_;
  std::unique_ptr<GrpcService> service_;
  std::unique_ptr<ReflectionV1Service> reflection_v1_;
  // Set with --auth-token-file; outlives grpc_server_.
  std::unique_ptr<BearerTokenAuth> auth_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<metrics::MetricsServer> metrics_server_;
  std::string grpc_address_;
  // With --listen unix:PATH: the socket to remove at shutdown.
  std::string unix_listen_path_;
  bool stopped_ = false;
};

// gpuctld's entry point: parses flags, runs until SIGTERM or SIGINT, shuts
// down gracefully. Returns the process exit code (2 for usage errors, 1 if
// the daemon cannot start).
int RunDaemon(int argc, char** argv);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RUNTIME_DAEMON_MAIN_H_
