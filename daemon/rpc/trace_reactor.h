#ifndef GPUCTL_DAEMON_RPC_TRACE_REACTOR_H_
#define GPUCTL_DAEMON_RPC_TRACE_REACTOR_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/daemon_core.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpuctl::daemon {

// One Gpuctl.Trace call: the core's TraceObserver on one side, a gRPC
// server-streaming reactor on the other, writing each event serialized
// (the service's methods are raw: see raw_messages.h).
//
// Lifetime: owned by shared_ptrs, one held by the reactor itself until
// gRPC's OnDone, one by the core until it calls TraceObserver::OnDone; it
// is destroyed when both are gone. Events are queued and written one at a
// time; the call finishes once the queue is drained after the core's OnDone
// (or at once when StartTrace fails). A cancelled call posts
// core->CancelTrace; the core still ends with OnDone.
//
// Threading: observer methods run on the loop thread; reactions on gRPC
// threads; shared state is under mu_.
class TraceReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                           public TraceObserver,
                           public std::enable_shared_from_this<TraceReactor> {
 public:
  // The reactor for one call; it keeps itself alive until gRPC's OnDone.
  static std::shared_ptr<TraceReactor> Create(TaskRunner* loop);
  // Starts the trace in the core. Loop thread, once, before anything else.
  // `caller` names the client as gpuctld knows it (its address, and its
  // authenticated identity if any), for the manifest and the record of a
  // cancel; `token` is the name of its scoped token, or empty.
  void StartOnLoop(DaemonCore* core, const v1::TraceRequest& request, std::string caller,
                   std::string token = "");

  explicit TraceReactor(TaskRunner* loop) : loop_(loop) {}

  // TraceObserver (loop thread).
  void OnEvent(const v1::TraceEvent& event) override;
  void OnDone(const absl::Status& status) override;

  // grpc::ServerWriteReactor.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Starts the next write or the Finish, if one is due. Called without mu_.
  void Pump();

  TaskRunner* const loop_;
  // Loop thread only.
  DaemonCore* core_ = nullptr;
  std::string trace_id_;
  std::string caller_;
  bool core_done_ = false;

  absl::Mutex mu_;
  std::deque<v1::TraceEvent> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer in_flight_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> final_status_ ABSL_GUARDED_BY(mu_);
  // Keeps this alive until gRPC's OnDone.
  std::shared_ptr<TraceReactor> self_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_TRACE_REACTOR_H_
