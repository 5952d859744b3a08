// The agent thread: keeps one connection to the daemon (reconnecting with
// backoff), registers with Hello, and runs captures for it.
//
// Idle and connected, the thread is blocked in ppoll() on the socket and a
// wake eventfd with no timeout. Timers exist only while disconnected
// (backoff), while waiting for HelloAck, and during a capture; a capture's
// instants are met with nanosecond timeouts. While disconnected the thread
// also watches the socket's directory (SocketWatch), so a daemon that comes
// back is reached as soon as its socket appears, not when the backoff
// (up to backoff_max_ms) runs out.
//
// Every Hello carries the step counter page's descriptor when there is one
// (AgentOptions::step_page_fd), so the daemon reads the current step of the
// process from memory. A daemon that closes the connection before HelloAck
// after such a Hello (protocol 1.0 refuses descriptors there) gets the next
// Hello without it; after a completed handshake the page is offered again
// on the next connection.
//
// A daemon that refuses the Hello (HelloRejected: a uid not allowed,
// another protocol major...) is reported once per distinct message and
// retried only every backoff_max_ms, the refusal being unlikely to change
// soon; the application is never disturbed.
//
// A process that cannot reach the daemon at all (a wrong GPUCTL_SOCKET, a
// socket whose mode refuses its uid, no daemon) says so once, with the
// socket's path and the error, after failing to attach for
// unreachable_report_after_ms: short-lived processes (what a preloaded
// shell spawns) never print it, and GPUCTL_QUIET=1 silences it. With
// GPUCTL_DEBUG=1 every attach step is reported.
//
// Threads: Start/RequestStop/Join/WaitStopped are called by the owner
// (Runtime) under its lock; OnStepMarked by application threads (under the
// owner's lock, so never during those); connected() from anywhere;
// everything else runs on the agent thread.
#ifndef GPUCTL_CLIENT_LIB_SRC_AGENT_H_
#define GPUCTL_CLIENT_LIB_SRC_AGENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "client_lib/src/activity_source.h"
#include "client_lib/src/annotation_state.h"
#include "client_lib/src/backoff.h"
#include "client_lib/src/capture_session.h"
#include "client_lib/src/clock.h"
#include "client_lib/src/ipc_client.h"
#include "client_lib/src/mutex.h"
#include "client_lib/src/socket_watch.h"
#include "client_lib/src/wire/ipc_messages.h"

namespace gpuctl::client {

struct AgentOptions {
  std::string socket_path = "/run/gpuctl/gpuctl.sock";
  bool force_inline = false;  // GPUCTL_FORCE_INLINE=1: no memfd
  int64_t backoff_initial_ms = 100;
  int64_t backoff_max_ms = 30'000;
  int hello_timeout_ms = 5'000;
  int send_timeout_ms = 2'000;
  // How long one datagram of a result may wait for socket room. The daemon
  // stops reading inline payloads while its ingest budget is spent
  // (backpressure), so this is long; a stop request ends the wait.
  int result_send_timeout_ms = 600'000;
  // The step counter page (StepCounterPage::fd()), sent with every Hello;
  // -1: none. Not owned.
  int step_page_fd = -1;
  // Where a refusal by the daemon (HelloRejected) is reported, once per
  // distinct message, on the agent thread; null: one line on stderr.
  std::function<void(const std::string&)> report;
  // How long attaching must have failed before the process says it cannot
  // reach the daemon (once per process).
  int64_t unreachable_report_after_ms = 10'000;
  // How long a new process (or fork child) waits before its first attempt
  // to attach: what a shell or shim execs on the way to the real program
  // is gone by then and never reaches the daemon (GPUCTL_ATTACH_DELAY_MS).
  int64_t attach_delay_ms = 500;
  bool quiet = false;  // GPUCTL_QUIET=1: no unreachable report
  bool debug = false;  // GPUCTL_DEBUG=1: report every attach step
};

class Agent final : private CaptureOutput {
 public:
  using HelloFactory = std::function<wire::Hello()>;

  // `clock`, `annotations` and `sources` must outlive the agent.
  Agent(AgentOptions options, Clock* clock, AnnotationState* annotations, HelloFactory hello,
        std::vector<ActivitySource*> sources);
  ~Agent() override;
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Creates the wake eventfd and the thread. False with `error` on failure.
  bool Start(std::string* error);
  // Asks the thread to send Goodbye{reason} (when connected) and exit.
  void RequestStop(const std::string& reason);
  // Waits up to `timeout_ms` for the thread to finish; true when it did.
  bool WaitStopped(int timeout_ms);
  void Join();

  // True between HelloAck and the connection's end.
  bool connected() const { return connected_.load(std::memory_order_acquire); }
  // Why the last connection attempt or connection ended ("" if none): the
  // library's internal status, for diagnostics and tests.
  std::string last_error() const;
  // Handshakes completed so far (tests).
  uint64_t handshakes() const { return handshakes_.load(std::memory_order_acquire); }
  // Hellos the daemon refused so far (tests).
  uint64_t rejections() const { return rejections_.load(std::memory_order_acquire); }

  // Application thread, step slow path while kGateStepWatch is set.
  void OnStepMarked(uint64_t step, int64_t now_ns) { session_.OnStepMarked(step, now_ns); }

  // fork(): the prepare handler holds this lock so the child never sees a
  // descriptor half-created or half-closed. Not analysed: the lock spans
  // two handlers, and is taken only when the runtime has an agent.
  void LockForFork() GPUCTL_NO_THREAD_SAFETY_ANALYSIS { fd_mu_.Lock(); }
  void UnlockForFork() GPUCTL_NO_THREAD_SAFETY_ANALYSIS { fd_mu_.Unlock(); }
  // In a fork child (lock held): closes the child's copies of the socket
  // and eventfd. The thread does not exist there; never join or destroy.
  void AbandonInForkChild();

 private:
  void Run();
  bool Connect();
  void Disconnect(const std::string& why);
  void SetLastError(const std::string& error);
  // Waits `delay_ms`, or until woken or the socket's path changes.
  void Sleep(int64_t delay_ms);
  // Starts the socket watch when not yet armed (disconnected).
  void ArmWatch();
  void DrainWake();
  // Reads every queued datagram; false when the connection must be dropped.
  bool ReadMessages();
  bool HandleMessage(const wire::DaemonMessage& message);
  // Reports a refusal (once per message) and disconnects.
  void OnRejected(const wire::HelloRejected& rejected);
  // After a failed connection attempt: the unreachable report, when due.
  void OnAttachFailed();
  // One line to options_.report, or "gpuctl: <text>" on stderr.
  void Report(const std::string& text);
  void Debug(const std::string& text) {
    if (options_.debug) Report("debug: " + text);
  }
  // The wait before the next connection attempt.
  int64_t RetryDelayMs();
  // Nanoseconds until a timer is due; -1: none.
  int64_t PollTimeoutNs();
  void SayGoodbye();

  bool SendStarted(const wire::CaptureStarted& started) override;
  bool SendResult(const wire::CaptureResult& result, const std::string* payload) override;
  void Wake() override;

  const AgentOptions options_;
  Clock* const clock_;
  const HelloFactory hello_;
  CaptureSession session_;
  Backoff backoff_;

  Mutex fd_mu_;  // around creating/closing conn_, wake_fd_ and watch_
  IpcConnection conn_;
  SocketWatch watch_;  // armed only while disconnected
  int wake_fd_ = -1;
  bool awaiting_ack_ = false;
  bool sent_step_page_ = false;    // the current connection's Hello carried it
  bool omit_step_page_ = false;    // the last Hello with it was refused
  int64_t ack_deadline_ns_ = 0;    // monotonic
  bool refused_ = false;           // the last Hello was refused
  int quick_retries_left_ = 0;     // after the socket's path changed
  std::string last_reported_;      // the last refusal reported
  int64_t failing_since_ns_ = -1;  // monotonic; -1: attached, or not tried yet
  bool unreachable_reported_ = false;

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> handshakes_{0};
  std::atomic<uint64_t> rejections_{0};
  mutable Mutex stop_mu_;
  std::string stop_reason_ GPUCTL_GUARDED_BY(stop_mu_);
  std::string last_error_ GPUCTL_GUARDED_BY(stop_mu_);
  CondVar stopped_cv_;
  bool stopped_ GPUCTL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_AGENT_H_
