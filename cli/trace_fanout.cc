#include "cli/trace_fanout.h"

#include <algorithm>
#include <memory>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cli/bounded_parallel.h"
#include "cli/cancel_group.h"
#include "cli/clock_probe.h"
#include "cli/connection.h"
#include "cli/duration.h"
#include "cli/format.h"
#include "cli/proto_time.h"
#include "daemon/common/deadline_wait.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

// Concurrency. Each host's Trace stream is a reactor of gRPC's callback
// API, so an open window costs no thread of ours. A pool of at most
// --parallel dispatch threads connects to the hosts and sends their
// requests; a dispatch thread moves on to the next host as soon as its
// current one has answered with TraceStarted (or failed, or passed
// --host-timeout), so a host never waits for another host's window, only
// for a free dispatch slot. Connecting on a dispatch thread before sending
// lets caller_time be read right before the request leaves on an
// established connection (the clock offset then holds no connection set-up),
// and it bounds the connection attempts in flight. On that connection a few
// ProbeClock round trips come first (cli/clock_probe.h): the fastest gives
// the daemon's clock offset within half its round trip, sent along as
// caller_clock; a gpuctld without the call gets caller_time alone. A
// thread per host would do the same with blocking reads, but would hold
// one thread per open window, which a container's pid limit stops long
// before a large fleet.

namespace gpuctl::cli {
namespace {

class Fanout;

// One host: dispatched by a pool thread, then streamed by gRPC's threads.
class HostCall final : public grpc::ClientReadReactor<v1::TraceEvent> {
 public:
  HostCall(Fanout& fanout, size_t index, const HostEntry& entry);

  // On a dispatch thread: connect, send, wait for TraceStarted or the
  // per-host deadline.
  void Dispatch();
  // Waits until TraceStarted or the stream's end; past `deadline`, cancels.
  void AwaitStarted(absl::Time deadline);

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  enum class Phase { kWaiting, kRequested, kStreaming, kDone };

 private:
  friend class Fanout;

  // Sets the final status; mu_ held.
  void Finish(HostStatus status, std::string error);
  void Classify(const grpc::Status& status, bool cancelled);

  Fanout& fanout_;
  const size_t index_;
  const std::string dns_error_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Gpuctl::Stub> stub_;
  grpc::ClientContext context_;
  v1::TraceRequest request_;
  v1::TraceEvent event_;  // one read in flight at a time

  // Guarded by Fanout::mu_.
  HostTrace trace_;
  Phase phase_ = Phase::kWaiting;
  bool dispatch_timed_out_ = false;
  bool watchdog_fired_ = false;
  absl::Time watchdog_ = absl::InfiniteFuture();
  // Without a start instant in the request: the stream's time limit, from
  // the daemon's announced start (TraceStarted).
  bool limit_fired_ = false;
  absl::Time limit_ = absl::InfiniteFuture();
  // Extends watchdog_ to result_margin from now; mu_ held.
  void Heard();
};

class Fanout {
 public:
  Fanout(const std::vector<HostEntry>& hosts, const TraceFanoutOptions& options,
         InterruptSource* interrupts, TraceProgress& progress, TraceFanoutDeps deps)
      : options_(options),
        progress_(progress),
        clock_(deps.clock != nullptr ? deps.clock : &real_clock_),
        waiter_(clock_, deps.timers, &mu_, &changed_),
        cancel_(interrupts, [this] {
          absl::MutexLock lock(&mu_);
          changed_.SignalAll();
        }) {
    for (size_t i = 0; i < hosts.size(); ++i) {
      calls_.push_back(std::make_unique<HostCall>(*this, i, hosts[i]));
    }
  }

  TraceFanoutResult Run() {
    std::thread dispatcher([this] {
      RunBounded(calls_.size(), options_.parallel, [this](size_t i) { calls_[i]->Dispatch(); });
      absl::MutexLock lock(&mu_);
      dispatch_finished_ = true;
      changed_.SignalAll();
    });
    WatchUntilAllDone();
    dispatcher.join();
    TraceFanoutResult result;
    absl::MutexLock lock(&mu_);
    progress_.Finish();
    result.interrupted = cancel_.cancelled();
    for (auto& call : calls_) result.hosts.push_back(std::move(call->trace_));
    return result;
  }

 private:
  friend class HostCall;

  // Waits for every stream to end; gives up on a host whose trace has not
  // completed within result_margin of the end it announced or of its last
  // event, whichever is later.
  void WatchUntilAllDone() {
    absl::MutexLock lock(&mu_);
    while (!dispatch_finished_ || calls_done_ < calls_started_) {
      absl::Time next = absl::InfiniteFuture();
      for (auto& call : calls_) {
        if (call->phase_ == HostCall::Phase::kStreaming && !call->watchdog_fired_ &&
            !call->limit_fired_) {
          next = std::min({next, call->watchdog_, call->limit_});
        }
      }
      waiter_.Wait(next);
      const absl::Time now = clock_->Now();
      std::vector<grpc::ClientContext*> overdue;
      for (auto& call : calls_) {
        if (call->phase_ != HostCall::Phase::kStreaming || call->watchdog_fired_ ||
            call->limit_fired_) {
          continue;
        }
        if (call->watchdog_ <= now) {
          call->watchdog_fired_ = true;
        } else if (call->limit_ <= now) {
          call->limit_fired_ = true;
        } else {
          continue;
        }
        overdue.push_back(&call->context_);
      }
      if (overdue.empty()) continue;
      // A cancelled call's reactions may run on this thread.
      mu_.Unlock();
      for (grpc::ClientContext* context : overdue) context->TryCancel();
      mu_.Lock();
    }
  }

  const TraceFanoutOptions& options_;
  TraceProgress& progress_;
  RealClock real_clock_;
  Clock* const clock_;
  absl::Mutex mu_;
  absl::CondVar changed_;
  DeadlineWaiter waiter_;
  std::vector<std::unique_ptr<HostCall>> calls_;
  size_t calls_started_ ABSL_GUARDED_BY(mu_) = 0;
  size_t calls_done_ ABSL_GUARDED_BY(mu_) = 0;
  bool dispatch_finished_ ABSL_GUARDED_BY(mu_) = false;
  // Declared last: destroyed first, so its interrupt handler is disarmed
  // before anything it touches goes away. Lock order: the group's lock,
  // then mu_; mu_ is never held while calling into the group.
  CancelGroup cancel_;
};

HostCall::HostCall(Fanout& fanout, size_t index, const HostEntry& entry)
    : fanout_(fanout), index_(index), dns_error_(entry.error) {
  trace_.target = entry.target;
}

void HostCall::Finish(HostStatus status, std::string error) {
  trace_.status = status;
  trace_.error = std::move(error);
  phase_ = Phase::kDone;
  fanout_.progress_.HostDone(index_, status, trace_.error);
  fanout_.changed_.SignalAll();
}

void HostCall::Dispatch() {
  const TraceFanoutOptions& options = fanout_.options_;
  const absl::Time deadline = fanout_.clock_->Now() + options.host_timeout;
  {
    absl::MutexLock lock(&fanout_.mu_);
    if (fanout_.cancel_.cancelled()) {
      return Finish(HostStatus::kCancelled, "cancelled before contact");
    }
    if (!dns_error_.empty()) return Finish(HostStatus::kUnreachable, dns_error_);
    fanout_.progress_.Connecting(index_);
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      Connect(trace_.target, options.host_timeout, fanout_.cancel_.flag(), options.security);
  if (!channel.ok()) {
    HostFailure failure = ClassifyFailure(channel.status(), trace_.target);
    absl::MutexLock lock(&fanout_.mu_);
    return Finish(failure.status, std::move(failure.error));
  }
  channel_ = *std::move(channel);
  stub_ = v1::Gpuctl::NewStub(channel_);
  request_ = options.request;
  request_.clear_caller_clock();
  const std::vector<ClockProbeSample> probes = ProbeDaemonClock(
      *stub_, *fanout_.clock_, ClockProbeOptions{.deadline = deadline}, &fanout_.cancel_);
  if (std::optional<v1::CallerClock> measured = EstimateCallerClock(probes)) {
    *request_.mutable_caller_clock() = *std::move(measured);
  }
  absl::Time base = fanout_.clock_->Now();
  if (request_.has_start_time()) base = std::max(base, FromProtoTime(request_.start_time()));
  if (options.stream_length != absl::InfiniteDuration()) {
    const absl::Duration daemon_delay =
        request_.has_start_time() ? absl::ZeroDuration() : options.max_daemon_start_delay;
    context_.set_deadline(absl::ToChronoTime(base + daemon_delay + options.stream_length));
  }
  fanout_.cancel_.Add(&context_);  // not under mu_ (lock order)
  {
    absl::MutexLock lock(&fanout_.mu_);
    phase_ = Phase::kRequested;
    ++fanout_.calls_started_;
  }
  ToProtoTime(fanout_.clock_->Now(), request_.mutable_caller_time());
  stub_->async()->Trace(&context_, &request_, this);
  StartRead(&event_);
  StartCall();
  AwaitStarted(deadline);
}

void HostCall::AwaitStarted(absl::Time deadline) {
  absl::MutexLock lock(&fanout_.mu_);
  while (phase_ == Phase::kRequested && fanout_.clock_->Now() < deadline) {
    fanout_.waiter_.Wait(deadline);
  }
  if (phase_ != Phase::kRequested) return;
  dispatch_timed_out_ = true;
  fanout_.mu_.Unlock();
  context_.TryCancel();  // OnDone may run on this thread
  fanout_.mu_.Lock();
}

void HostCall::OnReadDone(bool ok) {
  if (!ok) return;  // the stream is over; OnDone follows
  {
    absl::MutexLock lock(&fanout_.mu_);
    TraceProgress& progress = fanout_.progress_;
    switch (event_.event_case()) {
      case v1::TraceEvent::kStarted: {
        const v1::TraceStarted& started = event_.started();
        trace_.started = started;
        if (phase_ == Phase::kRequested) phase_ = Phase::kStreaming;
        // The rest of the window as the daemon counts it, from its receipt
        // of the request, added to our receipt of its answer.
        const google::protobuf::Timestamp& since =
            IsSet(started.received_at()) ? started.received_at() : started.start_time();
        if (IsSet(started.end_time()) && IsSet(since)) {
          absl::Duration rest = std::max(absl::ZeroDuration(),
                                         FromProtoTime(started.end_time()) - FromProtoTime(since));
          watchdog_ = fanout_.clock_->Now() + rest + fanout_.options_.result_margin;
        }
        const absl::Duration stream_length = fanout_.options_.stream_length;
        if (!request_.has_start_time() && stream_length != absl::InfiniteDuration() &&
            IsSet(started.start_time()) && IsSet(since)) {
          const absl::Duration delay = std::max(
              absl::ZeroDuration(), FromProtoTime(started.start_time()) - FromProtoTime(since));
          limit_ = fanout_.clock_->Now() + delay + stream_length;
        }
        progress.Started(index_, started);
        fanout_.changed_.SignalAll();
        break;
      }
      case v1::TraceEvent::kProgress:
        if (event_.progress().has_joined()) trace_.joined.push_back(event_.progress().joined());
        progress.Progress(index_, event_.progress());
        Heard();
        break;
      case v1::TraceEvent::kResult:
        trace_.results[event_.result().pid()] = event_.result();
        progress.Result(index_, event_.result());
        Heard();
        break;
      case v1::TraceEvent::kCompleted:
        trace_.completed = event_.completed();
        break;
      default:
        break;  // An event kind newer than this CLI.
    }
  }
  StartRead(&event_);
}

void HostCall::Heard() {
  if (watchdog_ == absl::InfiniteFuture()) return;  // no announced end yet
  // The watch thread wakes at the old limit and finds the new one.
  watchdog_ = std::max(watchdog_, fanout_.clock_->Now() + fanout_.options_.result_margin);
}

void HostCall::OnDone(const grpc::Status& status) {
  absl::MutexLock lock(&fanout_.mu_);
  Classify(status, fanout_.cancel_.cancelled());
  ++fanout_.calls_done_;
}

void HostCall::Classify(const grpc::Status& status, bool cancelled) {
  const std::string& target = trace_.target;
  if (dispatch_timed_out_) {
    // Even when TraceStarted crossed the cancellation: the daemon stopped.
    return Finish(HostStatus::kTimedOut,
                  absl::StrCat("gpuctld at ", target, " did not start the trace within ",
                               FormatUserDuration(fanout_.options_.host_timeout)));
  }
  if (!trace_.accepted()) {
    if (cancelled) return Finish(HostStatus::kCancelled, "cancelled");
    if (status.ok()) {
      return Finish(HostStatus::kFailed, absl::StrCat("gpuctld at ", target,
                                                      " ended the trace stream before it started"));
    }
    HostFailure failure = ClassifyFailure(FromRpcStatus(status), target);
    return Finish(failure.status, std::move(failure.error));
  }
  const std::string id = Printable(trace_.started->trace_id());
  if (trace_.completed) {
    size_t total = trace_.results.size() + trace_.Missing().size();
    size_t ok = std::count_if(trace_.results.begin(), trace_.results.end(), [](const auto& e) {
      return e.second.status() == v1::CAPTURE_STATUS_OK;
    });
    if (ok == total) return Finish(HostStatus::kOk, "");
    return Finish(HostStatus::kFailed,
                  absl::StrCat(total - ok, " of ", total, " processes on ",
                               Printable(trace_.name()), " did not deliver a trace"));
  }
  if (cancelled) return Finish(HostStatus::kCancelled, "cancelled");
  if (watchdog_fired_) {
    return Finish(HostStatus::kTimedOut,
                  absl::StrCat("gpuctld at ", target, " did not finish trace ", id,
                               " in time: no progress for ",
                               FormatUserDuration(fanout_.options_.result_margin)));
  }
  if (limit_fired_ || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return Finish(HostStatus::kTimedOut,
                  absl::StrCat("gpuctld at ", target, " did not finish trace ", id,
                               " in time: still busy at the trace's time limit"));
  }
  if (!status.ok()) {
    // The host took the request: whatever broke, it counts as failed.
    return Finish(HostStatus::kFailed, ClassifyFailure(FromRpcStatus(status), target).error);
  }
  Finish(HostStatus::kFailed,
         absl::StrCat("gpuctld at ", target, " ended the trace stream before the trace completed"));
}

}  // namespace

std::string HostTrace::name() const {
  if (started && !started->host().empty()) return started->host();
  return target;
}

std::vector<const v1::ProcessInfo*> HostTrace::Missing() const {
  std::vector<const v1::ProcessInfo*> missing;
  if (!started) return missing;
  std::set<int32_t> seen;
  auto check = [&](const v1::ProcessInfo& p) {
    if (!results.contains(p.pid()) && seen.insert(p.pid()).second) missing.push_back(&p);
  };
  for (const v1::ProcessInfo& p : started->processes()) check(p);
  for (const v1::ProcessInfo& p : joined) check(p);
  return missing;
}

bool HostTrace::HasFiles() const {
  return std::any_of(results.begin(), results.end(),
                     [](const auto& e) { return !e.second.file().empty(); });
}

TraceFanoutResult RunTraceFanout(const std::vector<HostEntry>& hosts,
                                 const TraceFanoutOptions& options, InterruptSource* interrupts,
                                 TraceProgress& progress, TraceFanoutDeps deps) {
  Fanout fanout(hosts, options, interrupts, progress, deps);
  return fanout.Run();
}

}  // namespace gpuctl::cli
