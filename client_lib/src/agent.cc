#include "client_lib/src/agent.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <system_error>
#include <utility>

#include "client_lib/src/payload_sender.h"

namespace gpuctl::client {
namespace {

constexpr int kGoodbyeTimeoutMs = 200;
// Datagrams handled per wake-up before timers get a look.
constexpr int kMaxMessagesPerWake = 64;
constexpr int64_t kMaxTimerNs = 60'000'000'000;
// Attempts in quick succession once the socket's path changed.
constexpr int kQuickRetries = 7;

}  // namespace

Agent::Agent(AgentOptions options, Clock* clock, AnnotationState* annotations, HelloFactory hello,
             std::vector<ActivitySource*> sources)
    : options_(std::move(options)),
      clock_(clock),
      hello_(std::move(hello)),
      session_(clock, annotations, std::move(sources), this),
      backoff_(
          options_.backoff_initial_ms, options_.backoff_max_ms,
          static_cast<uint64_t>(clock->MonotonicNs()) ^ (static_cast<uint64_t>(getpid()) << 32)),
      conn_(clock),
      watch_(options_.socket_path) {}

Agent::~Agent() {
  if (thread_.joinable()) {
    RequestStop("shutdown");
    Join();
  }
  session_.Abort();
  conn_.Close();
  watch_.Close();
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool Agent::Start(std::string* error) {
  {
    MutexLock lock(&fd_mu_);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  }
  if (wake_fd_ < 0) {
    *error = "eventfd failed";
    return false;
  }
  // The application's signals must never be delivered to this thread.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  bool started = true;
  try {
    thread_ = std::thread(&Agent::Run, this);
  } catch (const std::system_error&) {
    started = false;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (!started) *error = "cannot create the agent thread";
  return started;
}

void Agent::RequestStop(const std::string& reason) {
  {
    MutexLock lock(&stop_mu_);
    stop_reason_ = reason;
  }
  stop_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
}

bool Agent::WaitStopped(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  MutexLock lock(&stop_mu_);
  while (!stopped_) {
    if (!stopped_cv_.WaitUntil(&stop_mu_, deadline)) return stopped_;
  }
  return true;
}

void Agent::Join() {
  if (thread_.joinable()) thread_.join();
}

void Agent::AbandonInForkChild() {
  conn_.Close();
  watch_.Abandon();
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
  connected_.store(false, std::memory_order_release);
}

void Agent::Run() {
  pthread_setname_np(pthread_self(), "gpuctl-agent");
  // This thread's timers fire when due instead of up to 50 µs later.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  try {
    if (options_.attach_delay_ms > 0) {
      Debug("attaching in " + std::to_string(options_.attach_delay_ms) + "ms");
      Sleep(options_.attach_delay_ms);
    }
    while (!stop_.load(std::memory_order_acquire)) {
      // Armed before the attempt, so a socket that appears after a failed
      // one is always seen.
      if (!conn_.is_open()) ArmWatch();
      if (!conn_.is_open() && !Connect()) {
        OnAttachFailed();
        Sleep(RetryDelayMs());
        continue;
      }
      pollfd fds[2] = {{conn_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      const int64_t timeout_ns = PollTimeoutNs();
      const timespec timeout{static_cast<time_t>(timeout_ns / 1'000'000'000),
                             static_cast<decltype(timespec::tv_nsec)>(timeout_ns % 1'000'000'000)};
      const int rc = ppoll(fds, 2, timeout_ns < 0 ? nullptr : &timeout, nullptr);
      if (rc < 0 && errno != EINTR) {
        Disconnect("poll failed");
      } else if ((fds[1].revents & POLLIN) != 0) {
        DrainWake();
      }
      if (stop_.load(std::memory_order_acquire)) break;
      bool ok = conn_.is_open();
      if (ok && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) ok = ReadMessages();
      if (ok && awaiting_ack_ && clock_->MonotonicNs() >= ack_deadline_ns_) {
        Disconnect("no HelloAck from the daemon in time");
        ok = false;
      }
      if (ok && !session_.OnTimer()) {
        Disconnect("sending a capture message failed");
        ok = false;
      }
      if (!ok) {
        ArmWatch();
        Sleep(RetryDelayMs());
      }
    }
    SayGoodbye();
  } catch (...) {
    // Out of memory inside the library: give up quietly, the host goes on.
    session_.Abort();
  }
  MutexLock lock(&stop_mu_);
  stopped_ = true;
  stopped_cv_.SignalAll();
}

bool Agent::Connect() {
  std::string error;
  {
    Debug("connecting to " + options_.socket_path);
    MutexLock lock(&fd_mu_);
    if (!conn_.Connect(options_.socket_path, &error)) {
      SetLastError(error);
      return false;
    }
  }
  wire::Hello hello = hello_();
  sent_step_page_ = options_.step_page_fd >= 0 && !omit_step_page_;
  if (sent_step_page_) {
    hello.step_counter = true;
    hello.capabilities |= wire::kCapabilityStepCounter;
  }
  if (SendClientMessage(conn_, hello, sent_step_page_ ? options_.step_page_fd : -1,
                        options_.send_timeout_ms) != IoResult::kOk) {
    Disconnect("sending Hello failed");
    return false;
  }
  awaiting_ack_ = true;
  ack_deadline_ns_ = clock_->MonotonicNs() + int64_t{options_.hello_timeout_ms} * 1'000'000;
  Debug(std::string("Hello sent") + (sent_step_page_ ? " with the step counter page" : ""));
  return true;
}

void Agent::OnAttachFailed() {
  const std::string error = last_error();
  Debug("attach failed: " + error);
  const int64_t now = clock_->MonotonicNs();
  if (failing_since_ns_ < 0) failing_since_ns_ = now;
  if (unreachable_reported_ || options_.quiet || refused_) return;
  const int64_t failing_ms = (now - failing_since_ns_) / 1'000'000;
  if (failing_ms < options_.unreachable_report_after_ms) return;
  unreachable_reported_ = true;
  Report("cannot attach to gpuctld at " + options_.socket_path + ": " + error.substr(0, 512) +
         " (for " + std::to_string(failing_ms / 1000) +
         "s); profiling starts once it is reachable. GPUCTL_SOCKET names the socket, "
         "GPUCTL_QUIET=1 silences this");
}

void Agent::Report(const std::string& text) {
  if (options_.report) {
    options_.report(text);
    return;
  }
  const std::string line = "gpuctl: " + text + "\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

std::string Agent::last_error() const {
  MutexLock lock(&stop_mu_);
  return last_error_;
}

void Agent::SetLastError(const std::string& error) {
  MutexLock lock(&stop_mu_);
  last_error_ = error;
}

void Agent::Disconnect(const std::string& why) {
  Debug("disconnected: " + why);
  SetLastError(why);
  session_.Abort();
  connected_.store(false, std::memory_order_release);
  awaiting_ack_ = false;
  MutexLock lock(&fd_mu_);
  conn_.Close();
}

void Agent::ArmWatch() {
  if (watch_.fd() >= 0) return;
  bool armed;
  {
    MutexLock lock(&fd_mu_);
    armed = watch_.Arm();
  }
  Debug(armed ? "watching for the socket to appear" : "cannot watch the socket's directory");
}

void Agent::Sleep(int64_t delay_ms) {
  const int64_t deadline_ns =
      clock_->MonotonicNs() + std::min<int64_t>(delay_ms, 60'000) * 1'000'000;
  for (;;) {
    const int64_t left_ms = (deadline_ns - clock_->MonotonicNs() + 999'999) / 1'000'000;
    if (left_ms <= 0) return;
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {watch_.fd(), POLLIN, 0}};
    const nfds_t count = watch_.fd() >= 0 ? 2 : 1;
    const int rc = poll(fds, count, static_cast<int>(left_ms));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return;
    if ((fds[0].revents & POLLIN) != 0) {
      DrainWake();
      return;
    }
    bool appeared;
    {
      MutexLock lock(&fd_mu_);
      appeared = watch_.Drain();
    }
    if (appeared) {
      // Something changed at the socket's path: try now, and while the
      // daemon is not quite listening yet (bind, chmod, listen), again soon.
      Debug("the socket's path changed; attaching now");
      quick_retries_left_ = kQuickRetries;
      return;
    }
    // Another name in the directory: sleep on.
  }
}

void Agent::DrainWake() {
  uint64_t value;
  while (read(wake_fd_, &value, sizeof(value)) == sizeof(value)) {
  }
}

int64_t Agent::PollTimeoutNs() {
  int64_t timeout = -1;
  if (std::optional<int64_t> deadline = session_.DeadlineNs()) {
    const int64_t now = clock_->RealtimeNs();
    // Capped so that a clock step is noticed within a minute.
    timeout = *deadline <= now ? 0 : std::min(*deadline - now, kMaxTimerNs);
  }
  if (awaiting_ack_) {
    const int64_t left = std::max<int64_t>(0, ack_deadline_ns_ - clock_->MonotonicNs());
    timeout = timeout < 0 ? left : std::min(timeout, left);
  }
  return timeout;
}

bool Agent::ReadMessages() {
  std::string datagram;
  for (int i = 0; i < kMaxMessagesPerWake; ++i) {
    const IoResult received = conn_.Receive(&datagram);
    if (received == IoResult::kWouldBlock) return true;
    if (received == IoResult::kClosed && awaiting_ack_ && sent_step_page_) {
      // A protocol 1.0 daemon refuses a Hello with a descriptor: the next
      // Hello goes without the page (until a handshake succeeds).
      omit_step_page_ = true;
      Disconnect("daemon closed the connection before HelloAck; retrying without the step page");
      return false;
    }
    if (received != IoResult::kOk) {
      Disconnect(received == IoResult::kClosed ? "daemon closed the connection" : "receive failed");
      return false;
    }
    wire::DaemonMessage message;
    if (!wire::Decode(datagram, &message)) {
      Disconnect("malformed message from the daemon");
      return false;
    }
    if (const auto* rejected = std::get_if<wire::HelloRejected>(&message)) {
      if (!awaiting_ack_) {
        Disconnect("protocol error");
        return false;
      }
      OnRejected(*rejected);
      return false;
    }
    if (!HandleMessage(message)) {
      Disconnect("protocol error");
      return false;
    }
  }
  return true;
}

bool Agent::HandleMessage(const wire::DaemonMessage& message) {
  if (const auto* ack = std::get_if<wire::HelloAck>(&message)) {
    if (!awaiting_ack_ || ack->protocol_major != wire::kProtocolMajor) return false;
    awaiting_ack_ = false;
    session_.set_max_payload_bytes(ack->max_payload_bytes);
    backoff_.Reset();
    quick_retries_left_ = 0;
    refused_ = false;
    failing_since_ns_ = -1;
    Debug("attached (HelloAck)");
    {
      // Connected, the process wakes for nothing.
      MutexLock lock(&fd_mu_);
      watch_.Close();
    }
    handshakes_.fetch_add(1, std::memory_order_acq_rel);
    omit_step_page_ = false;
    connected_.store(true, std::memory_order_release);
    return true;
  }
  // Nothing but HelloAck is valid before the handshake completes.
  if (awaiting_ack_) return false;
  if (const auto* start = std::get_if<wire::StartCapture>(&message)) {
    return session_.OnStartCapture(*start);
  }
  if (const auto* cancel = std::get_if<wire::CancelCapture>(&message)) {
    return session_.OnCancelCapture(*cancel);
  }
  // A message kind from a newer daemon: ignored.
  return true;
}

void Agent::OnRejected(const wire::HelloRejected& rejected) {
  constexpr size_t kMaxShownBytes = 512;
  std::string text = "gpuctld refused this process: " + rejected.message.substr(0, kMaxShownBytes);
  if (rejected.reason == static_cast<int32_t>(wire::RejectReason::kProtocolVersion)) {
    text += " (library protocol " + std::to_string(wire::kProtocolMajor) + "." +
            std::to_string(wire::kProtocolMinor) + ", daemon " +
            std::to_string(rejected.protocol_major) + "." +
            std::to_string(rejected.protocol_minor) + ")";
  }
  const int64_t delay = options_.backoff_max_ms;
  text += "; no profiling until it accepts (retrying every " +
          (delay % 1000 == 0 ? std::to_string(delay / 1000) + "s)" : std::to_string(delay) + "ms)");
  refused_ = true;
  Disconnect(text);
  if (text != last_reported_) {
    last_reported_ = text;
    Report(text);
  }
  // Last: whoever sees the count sees the report and last_error() too.
  rejections_.fetch_add(1, std::memory_order_acq_rel);
}

int64_t Agent::RetryDelayMs() {
  // A refusal is a decision, not a failure: the full delay at once.
  if (refused_) return options_.backoff_max_ms;
  if (quick_retries_left_ > 0) {
    // 10, 20, 40 ... 640 ms after the socket's path changed.
    return int64_t{10} << (kQuickRetries - quick_retries_left_--);
  }
  return backoff_.NextDelayMs();
}

void Agent::SayGoodbye() {
  session_.Abort();
  if (conn_.is_open()) {
    wire::Goodbye goodbye;
    {
      MutexLock lock(&stop_mu_);
      goodbye.reason = stop_reason_;
    }
    SendClientMessage(conn_, goodbye, -1, kGoodbyeTimeoutMs);
  }
  connected_.store(false, std::memory_order_release);
  MutexLock lock(&fd_mu_);
  conn_.Close();
}

void Agent::Wake() {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
}

bool Agent::SendStarted(const wire::CaptureStarted& started) {
  return SendClientMessage(conn_, started, -1, options_.send_timeout_ms) == IoResult::kOk;
}

bool Agent::SendResult(const wire::CaptureResult& result, const std::string* payload) {
  if (payload == nullptr) {
    return SendClientMessage(conn_, result, -1, options_.send_timeout_ms) == IoResult::kOk;
  }
  return SendCaptureResultWithPayload(conn_, result, *payload, options_.force_inline,
                                      options_.result_send_timeout_ms, &stop_) == IoResult::kOk;
}

}  // namespace gpuctl::client
