#include "daemon/rpc/trace_reactor.h"

#include <utility>

#include "daemon/common/log.h"
#include "daemon/rpc/raw_messages.h"
#include "daemon/rpc/status_util.h"

namespace gpuctl::daemon {

std::shared_ptr<TraceReactor> TraceReactor::Create(TaskRunner* loop) {
  auto reactor = std::make_shared<TraceReactor>(loop);
  absl::MutexLock lock(&reactor->mu_);
  reactor->self_ = reactor;
  return reactor;
}

void TraceReactor::StartOnLoop(DaemonCore* core, const v1::TraceRequest& request,
                               std::string caller, std::string token) {
  core_ = core;
  caller_ = std::move(caller);
  v1::TraceTrigger trigger = OnDemandTrigger(caller_);
  trigger.set_token(std::move(token));
  absl::StatusOr<std::string> id = core_->StartTrace(request, trigger, shared_from_this());
  if (!id.ok()) {
    core_done_ = true;
    LogInfo("trace refused", {{"caller", caller_}, {"reason", id.status().ToString()}});
    {
      absl::MutexLock lock(&mu_);
      final_status_ = ToGrpcStatus(id.status());
    }
    Pump();
    return;
  }
  trace_id_ = *id;
  // Every trace, with who asked for it (the core logs what it started).
  LogInfo("trace requested", {{"trace_id", trace_id_}, {"caller", caller_}});
}

void TraceReactor::OnEvent(const v1::TraceEvent& event) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || stream_broken_) return;
    queue_.push_back(event);
  }
  Pump();
}

void TraceReactor::OnDone(const absl::Status& status) {
  core_done_ = true;
  {
    absl::MutexLock lock(&mu_);
    final_status_ = ToGrpcStatus(status);
  }
  Pump();
}

void TraceReactor::Pump() {
  const grpc::ByteBuffer* to_write = nullptr;
  bool more_queued = false;
  std::optional<grpc::Status> to_finish;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || write_in_flight_) return;
    if (!queue_.empty() && !stream_broken_) {
      in_flight_ = SerializeReply(queue_.front());
      queue_.pop_front();
      write_in_flight_ = true;
      to_write = &in_flight_;
      more_queued = !queue_.empty();
    } else if (final_status_.has_value()) {
      queue_.clear();
      finished_ = true;
      to_finish = std::move(final_status_);
    }
  }
  // Outside mu_: a reaction may run inline and take mu_ again. in_flight_
  // is not touched again until OnWriteDone.
  if (to_write != nullptr) {
    // Events queued behind this one (a trace over many processes reports
    // each of them at once): gRPC may hold this one back and send them
    // together; the last of the burst goes without the hint and flushes.
    StartWrite(to_write,
               more_queued ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions());
  } else if (to_finish.has_value()) {
    Finish(*to_finish);
  }
}

void TraceReactor::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    // The stream is gone (client cancelled or disconnected): OnCancel
    // follows; the call finishes when the core reports OnDone.
    if (!ok) stream_broken_ = true;
  }
  Pump();
}

void TraceReactor::OnCancel() {
  std::shared_ptr<TraceReactor> self = shared_from_this();
  loop_->Post([self] {
    // StartOnLoop was posted first, so trace_id_ is known by now.
    if (!self->core_done_ && !self->trace_id_.empty()) {
      LogInfo("trace cancelled by the caller",
              {{"trace_id", self->trace_id_}, {"caller", self->caller_}});
      v1::TraceCancellation why;
      why.set_reason("the caller cancelled its Trace call (Ctrl-C), or its connection closed");
      why.set_cancelled_by(self->caller_);
      self->core_->CancelTrace(self->trace_id_, std::move(why));
    }
  });
}

void TraceReactor::OnDone() {
  std::shared_ptr<TraceReactor> self;
  {
    absl::MutexLock lock(&mu_);
    self = std::move(self_);
  }
  // `self` may be the last reference: nothing after this line.
}

}  // namespace gpuctl::daemon
