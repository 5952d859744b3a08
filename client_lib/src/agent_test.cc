// The agent against a fake daemon on a real socket in a temp dir.
#include "client_lib/src/agent.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "client_lib/src/fake_daemon_for_test.h"
#include "client_lib/src/host_source.h"
#include "client_lib/src/payload_decoder_for_test.h"
#include "client_lib/src/process_identity.h"
#include "client_lib/src/steerable_clock_for_test.h"
#include "client_lib/src/step_counter_page.h"

namespace gpuctl::client {
namespace {

using testing::DecodePayload;
using testing::FakeDaemon;
using testing::kWaitMs;
using testing::SteerableClock;
using testing::TempDir;

template <typename Pred>
bool WaitFor(Pred pred, int timeout_ms = kWaitMs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Monotonic reads of a result's sender once the result is on its way: one
// per datagram it sends, one per look at the clock while waiting for room.
// More than a socket holds datagrams of a large payload, so by then the
// sender has been waiting for room.
constexpr uint64_t kBlockedSendReads = 12;

std::string ReadAll(int fd, size_t size) {
  std::string out(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, out.data() + done, size - done, static_cast<off_t>(done));
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

class AgentTest : public ::testing::Test {
 protected:
  void StartAgent(bool force_inline = false, int step_page_fd = -1) {
    AgentOptions options;
    options.socket_path = path_;
    options.force_inline = force_inline;
    options.step_page_fd = step_page_fd;
    options.backoff_initial_ms = backoff_initial_ms_;
    options.backoff_max_ms = backoff_max_ms_;
    options.attach_delay_ms = attach_delay_ms_;
    options.report = report_;
    options.unreachable_report_after_ms = unreachable_report_after_ms_;
    options.quiet = quiet_;
    options.debug = debug_;
    EnvLookup env = [](const char* name) -> std::optional<std::string> {
      static const std::map<std::string, std::string> kEnv = {{"SLURM_JOB_ID", "slurm-9"},
                                                              {"GPUCTL_JOB_ID", "job-7"},
                                                              {"RANK", "3"},
                                                              {"LOCAL_RANK", "x1"}};
      auto it = kEnv.find(name);
      if (it == kEnv.end()) return std::nullopt;
      return it->second;
    };
    agent_ = std::make_unique<Agent>(
        options, &clock_, &state_, [env] { return BuildHello(env, "/proc"); },
        std::vector<ActivitySource*>{&host_});
    std::string error;
    ASSERT_TRUE(agent_->Start(&error)) << error;
  }
  void TearDown() override {
    if (agent_ != nullptr) {
      agent_->RequestStop("test end");
      agent_->Join();
    }
  }
  void Connect(bool force_inline = false) {
    StartAgent(force_inline);
    ASSERT_TRUE(daemon_->Handshake());
    ASSERT_TRUE(WaitFor([&] { return agent_->connected(); }));
  }
  wire::StartCapture StartNow(const std::string& id, int64_t duration_ms) {
    wire::StartCapture start;
    start.trace_id = id;
    start.start_time_unix_ns = clock_.RealtimeNs();
    start.duration_ns = duration_ms * 1'000'000;
    return start;
  }
  // Waits for a result that the daemon, not reading, leaves blocked on a
  // full socket: its first datagram is queued and the agent has since
  // waited for room.
  bool WaitForBlockedResult() {
    pollfd pfd{daemon_->conn_fd(), POLLIN, 0};
    if (poll(&pfd, 1, kWaitMs) <= 0) return false;
    const uint64_t reads = clock_.monotonic_reads();
    return WaitFor([&] { return clock_.monotonic_reads() >= reads + kBlockedSendReads; });
  }

  TempDir dir_;
  std::string path_ = dir_.path() + "/gpuctl.sock";
  std::unique_ptr<FakeDaemon> daemon_ = std::make_unique<FakeDaemon>(path_);
  SteerableClock clock_;
  AnnotationState state_;
  HostSource host_{&state_, &clock_};
  std::unique_ptr<Agent> agent_;
  std::function<void(const std::string&)> report_;
  int64_t unreachable_report_after_ms_ = 10'000;
  int64_t backoff_initial_ms_ = 5;
  int64_t backoff_max_ms_ = 100;
  int64_t attach_delay_ms_ = 0;
  bool quiet_ = false;
  bool debug_ = false;
};

// Collects the agent's reports (thread-safe).
class Reports {
 public:
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& text) {
      std::lock_guard lock(mu_);
      lines_.push_back(text);
    };
  }
  std::vector<std::string> Lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  size_t Containing(const std::string& text) {
    std::lock_guard lock(mu_);
    return std::count_if(lines_.begin(), lines_.end(),
                         [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(AgentTest, HelloCarriesTheProcessIdentity) {
  Connect();
  const wire::Hello& hello = daemon_->hello();
  EXPECT_EQ(hello.protocol_major, wire::kProtocolMajor);
  EXPECT_EQ(hello.protocol_minor, wire::kProtocolMinor);
  EXPECT_EQ(hello.library_version, "0.1.0");
  EXPECT_EQ(hello.pid, getpid());
  EXPECT_EQ(hello.ppid, getppid());
  EXPECT_EQ(hello.job_id, "job-7");  // GPUCTL_JOB_ID wins over SLURM_JOB_ID
  EXPECT_EQ(hello.rank, 3);
  EXPECT_EQ(hello.local_rank, -1);  // unparsable
  EXPECT_EQ(hello.world_size, -1);  // absent
  EXPECT_FALSE(hello.hostname.empty());
  ASSERT_FALSE(hello.cmdline.empty());
  EXPECT_NE(hello.cmdline[0].find("client_lib_agent_test"), std::string::npos);
  uint64_t capabilities =
      wire::kCapabilityMemfd | wire::kCapabilityHostRanges | wire::kCapabilityStepWindows;
#ifdef GPUCTL_HAVE_CUPTI
  capabilities |= wire::kCapabilityCupti;
#endif
  EXPECT_EQ(hello.capabilities, capabilities);  // no page given: no step counter
  EXPECT_FALSE(hello.step_counter);
  EXPECT_EQ(daemon_->hello_fd(), -1);
}

TEST_F(AgentTest, EveryHelloCarriesTheStepCounterPage) {
  StepCounterPage page;
  page.Install(&state_);
  ASSERT_GE(page.fd(), 0);
  MarkStepN(state_, 99, clock_.RealtimeNs());
  StartAgent(false, page.fd());
  for (int connection = 0; connection < 2; ++connection) {
    ASSERT_TRUE(daemon_->Handshake());
    EXPECT_TRUE(daemon_->hello().step_counter);
    EXPECT_NE(daemon_->hello().capabilities & wire::kCapabilityStepCounter, 0u);
    const int fd = daemon_->hello_fd();
    ASSERT_GE(fd, 0);
    struct stat st {};
    ASSERT_EQ(fstat(fd, &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), steps::kStepPageBytes);
    EXPECT_EQ(fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    void* view = mmap(nullptr, steps::kStepPageBytes, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(view, MAP_FAILED);
    uint64_t next = 0;
    std::memcpy(&next, static_cast<char*>(view) + steps::kOffsetNextStep, sizeof(next));
    EXPECT_EQ(next, 100u + connection);
    munmap(view, steps::kStepPageBytes);
    MarkStep(state_, clock_.RealtimeNs());
    daemon_->CloseConnection();  // the agent reconnects and sends it again
  }
  agent_->RequestStop("test end");
  agent_->Join();
  agent_.reset();
  page.Uninstall(&state_);
}

TEST_F(AgentTest, ADaemonRefusingTheStepPageGetsHelloWithoutIt) {
  StepCounterPage page;
  page.Install(&state_);
  ASSERT_GE(page.fd(), 0);
  StartAgent(false, page.fd());
  // An older daemon: it drops a Hello that carries a descriptor.
  ASSERT_TRUE(daemon_->Accept());
  int fd = -1;
  std::optional<wire::Hello> refused = daemon_->ReceiveA<wire::Hello>(kWaitMs, &fd);
  ASSERT_TRUE(refused.has_value());
  EXPECT_TRUE(refused->step_counter);
  ASSERT_GE(fd, 0);
  close(fd);
  daemon_->CloseConnection();
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_FALSE(daemon_->hello().step_counter);
  EXPECT_EQ(daemon_->hello().capabilities & wire::kCapabilityStepCounter, 0u);
  EXPECT_EQ(daemon_->hello_fd(), -1);
  ASSERT_TRUE(WaitFor([&] { return agent_->connected(); }));
  // After a completed handshake the next connection offers it again.
  daemon_->CloseConnection();
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_TRUE(daemon_->hello().step_counter);
  EXPECT_GE(daemon_->hello_fd(), 0);
  agent_->RequestStop("test end");
  agent_->Join();
  agent_.reset();
  page.Uninstall(&state_);
}

// The start instant is met with a nanosecond timer: on an idle host the
// window opens well under a millisecond after it (loosely checked here: the
// test machine is small and shared).
TEST_F(AgentTest, WindowOpensAtTheStartInstant) {
  Connect();
  std::vector<int64_t> lateness;
  for (int i = 0; i < 5; ++i) {
    wire::StartCapture start = StartNow("instant-" + std::to_string(i), 1);
    start.start_time_unix_ns += 50'000'000;
    ASSERT_TRUE(daemon_->Send(start));
    std::optional<wire::CaptureStarted> started = daemon_->ReceiveA<wire::CaptureStarted>();
    ASSERT_TRUE(started.has_value());
    EXPECT_FALSE(started->late_start);
    EXPECT_GE(started->opened_at_unix_ns, start.start_time_unix_ns);
    lateness.push_back(started->opened_at_unix_ns - start.start_time_unix_ns);
    ASSERT_TRUE(daemon_->ReceiveA<wire::CaptureResult>().has_value());
  }
  std::sort(lateness.begin(), lateness.end());
  RecordProperty("median_open_lateness_ns", std::to_string(lateness[2]));
  EXPECT_LT(lateness[2], 10'000'000) << "median lateness " << lateness[2] << " ns";
}

// An iteration window through the real agent: the application thread's
// marks open and close it, the agent thread sends everything.
TEST_F(AgentTest, IterationWindowFollowsTheApplicationsSteps) {
  Connect();
  MarkStepN(state_, 49, clock_.RealtimeNs());
  wire::StartCapture start = StartNow("iterations", 60'000);
  start.start_step = 50;
  start.iterations = 2;
  ASSERT_TRUE(daemon_->Send(start));
  ASSERT_TRUE(WaitFor([&] { return (state_.gate.load() & kGateStepWatch) != 0; }));
  for (uint64_t step = 50; step <= 52; ++step) {
    const int64_t now = clock_.RealtimeNs();
    MarkStepN(state_, step, now);
    if ((state_.gate.load() & kGateStepWatch) != 0) agent_->OnStepMarked(step, now);
    host_.RecordStep(step, now);
    host_.Push("work");
    host_.Pop();
  }
  std::optional<wire::CaptureStarted> started = daemon_->ReceiveA<wire::CaptureStarted>();
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->first_step, 50u);
  int fd = -1;
  std::optional<wire::CaptureResult> result = daemon_->ReceiveA<wire::CaptureResult>(kWaitMs, &fd);
  ASSERT_TRUE(result.has_value());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(result->status, static_cast<int32_t>(wire::CaptureStatus::kOk)) << result->message;
  EXPECT_EQ(result->first_step, 50u);
  EXPECT_EQ(result->steps, 2u);
  std::string payload(result->payload_size, '\0');
  ASSERT_EQ(pread(fd, payload.data(), payload.size(), 0), static_cast<ssize_t>(payload.size()));
  close(fd);
  std::optional<testing::DecodedPayload> p = DecodePayload(payload);
  ASSERT_TRUE(p.has_value());
  std::vector<uint64_t> marks;
  for (const testing::DecodedEvent& e : p->OfKind(2)) marks.push_back(e.step);
  EXPECT_EQ(marks, (std::vector<uint64_t>{50, 51}));
  EXPECT_EQ(p->Ranges("work").size(), 2u);
  EXPECT_EQ(state_.gate.load(), 0u);
}

TEST_F(AgentTest, CaptureIsHandedOverAsASealedMemfd) {
  Connect();
  const wire::StartCapture start = StartNow("trace-1", 1500);
  ASSERT_TRUE(daemon_->Send(start));
  std::optional<wire::CaptureStarted> started = daemon_->ReceiveA<wire::CaptureStarted>();
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->trace_id, "trace-1");
  host_.StepN(41);
  host_.Push("forward");
  host_.Pop();
  host_.Push("open-at-end");

  int fd = -1;
  std::optional<wire::CaptureResult> result = daemon_->ReceiveA<wire::CaptureResult>(kWaitMs, &fd);
  ASSERT_TRUE(result.has_value());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(result->trace_id, "trace-1");
  EXPECT_EQ(result->status, static_cast<int32_t>(wire::CaptureStatus::kOk));
  EXPECT_EQ(result->transport, static_cast<int32_t>(wire::PayloadTransport::kMemfd));
  EXPECT_EQ(result->window_start_unix_ns, started->opened_at_unix_ns);
  // Every process of a trace closes at the start instant plus the duration,
  // however late it opened (within the skew bound): a window that opened
  // after the instant is that much shorter.
  EXPECT_GE(result->window_end_unix_ns, start.start_time_unix_ns + 1'500'000'000);
  EXPECT_GE(result->window_start_unix_ns, start.start_time_unix_ns);

  const int seals = fcntl(fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), result->payload_size);
  EXPECT_LT(write(fd, "x", 1), 0);  // sealed
  const std::string payload = ReadAll(fd, result->payload_size);
  close(fd);
  std::optional<testing::DecodedPayload> p = DecodePayload(payload);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->pid, getpid());
  EXPECT_EQ(p->window_start_ns, result->window_start_unix_ns);
  EXPECT_EQ(p->events.size(), result->event_count);
  ASSERT_EQ(p->Ranges("forward").size(), 1u);
  ASSERT_EQ(p->Ranges("open-at-end").size(), 1u);
  EXPECT_EQ(p->Ranges("open-at-end")[0].end_ns, result->window_end_unix_ns);
  ASSERT_EQ(p->OfKind(2).size(), 1u);
  EXPECT_EQ(p->OfKind(2)[0].step, 41u);
  EXPECT_EQ(state_.gate.load(), 0u);
}

TEST_F(AgentTest, InlineTransportSendsOrderedChunks) {
  Connect(/*force_inline=*/true);
  ASSERT_TRUE(daemon_->Send(StartNow("trace-inline", 1500)));
  ASSERT_TRUE(daemon_->ReceiveA<wire::CaptureStarted>().has_value());
  for (int i = 0; i < 4000; ++i) {  // > 2 chunks of records
    host_.Push("r");
    host_.Pop();
  }
  int fd = -1;
  std::optional<wire::CaptureResult> result = daemon_->ReceiveA<wire::CaptureResult>(kWaitMs, &fd);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(result->transport, static_cast<int32_t>(wire::PayloadTransport::kInline));
  ASSERT_GT(result->payload_size, 2 * 60000u);
  std::string payload;
  while (payload.size() < result->payload_size) {
    std::optional<wire::PayloadChunk> chunk = daemon_->ReceiveA<wire::PayloadChunk>();
    ASSERT_TRUE(chunk.has_value());
    EXPECT_EQ(chunk->trace_id, "trace-inline");
    EXPECT_EQ(chunk->offset, payload.size());
    EXPECT_LE(chunk->data.size(), 60000u);
    payload += chunk->data;
  }
  EXPECT_EQ(payload.size(), result->payload_size);
  std::optional<testing::DecodedPayload> p = DecodePayload(payload);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->Ranges("r").size(), 4000u);
}

// The daemon stops reading an inline payload while its ingest budget is
// spent. The agent waits for room far longer than an ordinary send may
// (AgentOptions::result_send_timeout_ms), and the whole payload arrives.
TEST_F(AgentTest, InlineResultWaitsOutTheDaemonsBackpressure) {
  Connect(/*force_inline=*/true);
  ASSERT_TRUE(daemon_->Send(StartNow("trace-held", 1000)));
  ASSERT_TRUE(daemon_->ReceiveA<wire::CaptureStarted>().has_value());
  for (int i = 0; i < 40000; ++i) {  // far more than the socket buffer holds
    host_.Push("r");
    host_.Pop();
  }
  // Each look at the clock while the socket is full finds 10 s more gone:
  // a wait bounded by send_timeout_ms (2 s) would end at its first.
  ASSERT_TRUE(WaitForBlockedResult());
  clock_.LeapOnEveryRead(10'000);
  const uint64_t reads = clock_.monotonic_reads();
  ASSERT_TRUE(WaitFor([&] { return clock_.monotonic_reads() >= reads + 3; }));
  clock_.LeapOnEveryRead(0);
  std::optional<wire::CaptureResult> result = daemon_->ReceiveA<wire::CaptureResult>();
  ASSERT_TRUE(result.has_value());
  ASSERT_GT(result->payload_size, 1u << 20);
  std::string payload;
  while (payload.size() < result->payload_size) {
    std::optional<wire::PayloadChunk> chunk = daemon_->ReceiveA<wire::PayloadChunk>();
    ASSERT_TRUE(chunk.has_value()) << payload.size() << " of " << result->payload_size;
    payload += chunk->data;
  }
  std::optional<testing::DecodedPayload> p = DecodePayload(payload);
  ASSERT_TRUE(p.has_value());
  // All that the window saw (a slow sanitizer build may close it before
  // the last pushes): far more than one socket buffer's worth.
  EXPECT_GT(p->Ranges("r").size(), 20000u);
  EXPECT_EQ(p->events.size(), result->event_count);
  EXPECT_TRUE(agent_->connected());
}

// A result blocked on a daemon that does not read never holds up the
// process's exit: a stop request ends the wait at once.
TEST_F(AgentTest, StopEndsAResultSendBlockedOnTheDaemon) {
  Connect(/*force_inline=*/true);
  ASSERT_TRUE(daemon_->Send(StartNow("trace-stuck", 100)));
  ASSERT_TRUE(daemon_->ReceiveA<wire::CaptureStarted>().has_value());
  for (int i = 0; i < 40000; ++i) {
    host_.Push("r");
    host_.Pop();
  }
  ASSERT_TRUE(WaitForBlockedResult());
  agent_->RequestStop("test end");
  // Far sooner than the send's own limit (result_send_timeout_ms, 10 min).
  EXPECT_TRUE(agent_->WaitStopped(kWaitMs));
  agent_->Join();
  agent_.reset();
}

TEST_F(AgentTest, SecondStartWhileCapturingIsBusyAndCancelEndsTheFirst) {
  Connect();
  ASSERT_TRUE(daemon_->Send(StartNow("first", 600'000)));
  ASSERT_TRUE(daemon_->ReceiveA<wire::CaptureStarted>().has_value());
  ASSERT_TRUE(daemon_->Send(StartNow("second", 1000)));
  std::optional<wire::CaptureResult> busy = daemon_->ReceiveA<wire::CaptureResult>();
  ASSERT_TRUE(busy.has_value());
  EXPECT_EQ(busy->trace_id, "second");
  EXPECT_EQ(busy->status, static_cast<int32_t>(wire::CaptureStatus::kBusy));
  EXPECT_NE(busy->message.find("first"), std::string::npos);

  wire::CancelCapture cancel;
  cancel.trace_id = "first";
  cancel.reason = "operator";
  ASSERT_TRUE(daemon_->Send(cancel));
  std::optional<wire::CaptureResult> cancelled = daemon_->ReceiveA<wire::CaptureResult>();
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->trace_id, "first");
  EXPECT_EQ(cancelled->status, static_cast<int32_t>(wire::CaptureStatus::kFailed));
  EXPECT_EQ(cancelled->message, "cancelled: operator");
  EXPECT_EQ(state_.gate.load(), 0u);

  // The agent is free again.
  ASSERT_TRUE(daemon_->Send(StartNow("third", 10)));
  std::optional<wire::CaptureStarted> third = daemon_->ReceiveA<wire::CaptureStarted>();
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->trace_id, "third");
}

TEST_F(AgentTest, StartInTheFutureWaitsForItsInstant) {
  Connect();
  wire::StartCapture start = StartNow("later", 10);
  start.start_time_unix_ns += 300'000'000;
  ASSERT_TRUE(daemon_->Send(start));
  std::optional<wire::CaptureStarted> started = daemon_->ReceiveA<wire::CaptureStarted>();
  ASSERT_TRUE(started.has_value());
  EXPECT_GE(started->opened_at_unix_ns, start.start_time_unix_ns);
}

TEST_F(AgentTest, InvalidRequestIsRejected) {
  Connect();
  wire::StartCapture start = StartNow("bad", 10);
  start.duration_ns = -1;
  ASSERT_TRUE(daemon_->Send(start));
  std::optional<wire::CaptureResult> result = daemon_->ReceiveA<wire::CaptureResult>();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status, static_cast<int32_t>(wire::CaptureStatus::kRejected));
}

TEST_F(AgentTest, MalformedDaemonMessageDropsAndReconnects) {
  Connect();
  ASSERT_TRUE(daemon_->SendRaw(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11)));
  EXPECT_TRUE(daemon_->WaitPeerClosed());
  EXPECT_TRUE(WaitFor([&] { return agent_->last_error() == "malformed message from the daemon"; }));
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_TRUE(WaitFor([&] { return agent_->handshakes() == 2 && agent_->connected(); }));
}

TEST_F(AgentTest, MessageBeforeHelloAckIsAProtocolError) {
  StartAgent();
  ASSERT_TRUE(daemon_->Accept());
  ASSERT_TRUE(daemon_->ReceiveA<wire::Hello>().has_value());
  ASSERT_TRUE(daemon_->Send(StartNow("early", 10)));
  EXPECT_TRUE(daemon_->WaitPeerClosed());
  EXPECT_FALSE(agent_->connected());
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_TRUE(WaitFor([&] { return agent_->connected(); }));
}

TEST_F(AgentTest, DaemonRestartReconnectsAndRegistersAgain) {
  Connect();
  daemon_.reset();  // daemon dies
  EXPECT_TRUE(WaitFor([&] { return !agent_->connected(); }));
  daemon_ = std::make_unique<FakeDaemon>(path_);
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_EQ(daemon_->hello().pid, getpid());
  EXPECT_TRUE(WaitFor([&] { return agent_->connected() && agent_->handshakes() == 2; }));
}

TEST_F(AgentTest, ConnectionLostMidCaptureStopsTheCapture) {
  Connect();
  ASSERT_TRUE(daemon_->Send(StartNow("doomed", 600'000)));
  ASSERT_TRUE(daemon_->ReceiveA<wire::CaptureStarted>().has_value());
  EXPECT_EQ(state_.gate.load(), kGateCapturing);
  daemon_->CloseConnection();
  EXPECT_TRUE(WaitFor([&] { return state_.gate.load() == 0; }));
  ASSERT_TRUE(daemon_->Handshake());
  // A new capture works on the new connection.
  ASSERT_TRUE(daemon_->Send(StartNow("next", 10)));
  std::optional<wire::CaptureStarted> started = daemon_->ReceiveA<wire::CaptureStarted>();
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->trace_id, "next");
}

TEST_F(AgentTest, NoDaemonThenDaemonAppears) {
  daemon_.reset();
  StartAgent();
  EXPECT_FALSE(agent_->connected());
  EXPECT_TRUE(WaitFor([&] { return agent_->last_error().find("connect") == 0; }));
  daemon_ = std::make_unique<FakeDaemon>(path_);
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_TRUE(WaitFor([&] { return agent_->connected(); }));
}

// What a shell or shim execs on the way to the real program lives less
// than the attach delay: it never reaches the daemon.
TEST_F(AgentTest, AProcessGoneWithinTheAttachDelayNeverConnects) {
  attach_delay_ms_ = 60'000;
  StartAgent();
  EXPECT_FALSE(daemon_->Accept(/*timeout_ms=*/300));
  const auto begin = std::chrono::steady_clock::now();
  agent_->RequestStop("exit");
  agent_->Join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
  EXPECT_FALSE(daemon_->Accept(/*timeout_ms=*/100));
  EXPECT_EQ(agent_->handshakes(), 0u);
}

TEST_F(AgentTest, AfterTheAttachDelayTheProcessAttaches) {
  attach_delay_ms_ = 200;
  const auto begin = std::chrono::steady_clock::now();
  Connect();
  EXPECT_GE(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(200));
}

// inotify instances this process holds (the agent's socket watch).
int InotifyDescriptors() {
  int count = 0;
  for (int fd = 0; fd < 1024; ++fd) {
    char link[64];
    char target[128] = {};
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    if (readlink(link, target, sizeof(target) - 1) > 0 &&
        std::strcmp(target, "anon_inode:inotify") == 0) {
      ++count;
    }
  }
  return count;
}

// The backoff is a minute here, longer than any wait below: only the
// socket watch can bring the agent back in time.
TEST_F(AgentTest, ADaemonThatComesBackIsReachedAtOnceNotAfterTheBackoff) {
  backoff_initial_ms_ = 60'000;
  backoff_max_ms_ = 60'000;
  Connect();
  EXPECT_EQ(InotifyDescriptors(), 0) << "connected, the agent watches nothing";
  daemon_.reset();
  ASSERT_TRUE(WaitFor([&] { return !agent_->connected(); }));
  EXPECT_TRUE(WaitFor([&] { return InotifyDescriptors() == 1; }));
  daemon_ = std::make_unique<FakeDaemon>(path_);
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_TRUE(WaitFor([&] { return agent_->connected() && agent_->handshakes() == 2; }));
  EXPECT_TRUE(WaitFor([&] { return InotifyDescriptors() == 0; }));
}

// systemd removes the daemon's RuntimeDirectory= while it is stopped and
// creates it again at start.
TEST_F(AgentTest, ASocketDirectoryRemovedAndCreatedAgainIsWaitedFor) {
  backoff_initial_ms_ = 60'000;
  backoff_max_ms_ = 60'000;
  daemon_.reset();
  const std::string run_dir = dir_.path() + "/run";
  const std::string nested = run_dir + "/gpuctl";
  path_ = nested + "/gpuctl.sock";
  ASSERT_EQ(mkdir(run_dir.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(nested.c_str(), 0755), 0);
  daemon_ = std::make_unique<FakeDaemon>(path_);
  Connect();
  daemon_.reset();
  ASSERT_TRUE(WaitFor([&] { return !agent_->connected(); }));
  ASSERT_EQ(rmdir(nested.c_str()), 0);
  ASSERT_EQ(rmdir(run_dir.c_str()), 0);
  // The agent notices the directory going and watches its parent.
  ASSERT_TRUE(WaitFor([&] { return InotifyDescriptors() == 1; }));
  ASSERT_EQ(mkdir(run_dir.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(nested.c_str(), 0755), 0);
  daemon_ = std::make_unique<FakeDaemon>(path_);
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_TRUE(WaitFor([&] { return agent_->connected() && agent_->handshakes() == 2; }));
}

TEST_F(AgentTest, OtherFilesInTheSocketsDirectoryDoNotCauseAttempts) {
  backoff_initial_ms_ = 60'000;
  backoff_max_ms_ = 60'000;
  daemon_.reset();
  Reports reports;
  report_ = reports.Sink();
  debug_ = true;
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return InotifyDescriptors() == 1; }));
  const size_t before = reports.Containing("debug: connecting to");
  for (int i = 0; i < 20; ++i) {
    const std::string other = dir_.path() + "/other-" + std::to_string(i);
    const int fd = open(other.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  // The socket's own name, last: exactly one attempt follows it.
  daemon_ = std::make_unique<FakeDaemon>(path_);
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_TRUE(WaitFor([&] { return agent_->connected(); }));
  // The socket exists a moment before it listens: a few quick attempts.
  EXPECT_LE(reports.Containing("debug: connecting to"), before + 4);
}

TEST_F(AgentTest, AnUnreachableDaemonIsReportedOnceNamingTheSocketAfterTheDelay) {
  daemon_.reset();
  Reports reports;
  report_ = reports.Sink();
  unreachable_report_after_ms_ = 200;
  const auto started = std::chrono::steady_clock::now();
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return reports.Lines().size() == 1; }));
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(200));
  const std::string line = reports.Lines()[0];
  EXPECT_NE(line.find("cannot attach to gpuctld at " + path_ + ": connect"), std::string::npos)
      << line;
  EXPECT_NE(line.find("GPUCTL_QUIET=1"), std::string::npos) << line;
  // Many more failed attempts (backoff_max_ms is 100): still one line.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(reports.Lines().size(), 1u);
  // Reaching the daemon later needs no restart.
  daemon_ = std::make_unique<FakeDaemon>(path_);
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_TRUE(WaitFor([&] { return agent_->connected(); }));
}

TEST_F(AgentTest, AShortLivedOrQuietProcessNeverReportsAnUnreachableDaemon) {
  daemon_.reset();
  Reports reports;
  report_ = reports.Sink();
  unreachable_report_after_ms_ = 10'000;
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return agent_->last_error().find("connect") == 0; }));
  agent_->RequestStop("exit");
  agent_->Join();
  agent_.reset();
  EXPECT_TRUE(reports.Lines().empty());

  quiet_ = true;
  unreachable_report_after_ms_ = 0;
  StartAgent();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(reports.Lines().empty());
}

TEST_F(AgentTest, DebugReportsEveryAttachStep) {
  Reports reports;
  report_ = reports.Sink();
  debug_ = true;
  Connect();
  EXPECT_TRUE(WaitFor([&] { return reports.Containing("debug: attached (HelloAck)") == 1; }));
  EXPECT_EQ(reports.Containing("debug: connecting to " + path_), 1u);
  EXPECT_EQ(reports.Containing("debug: Hello sent"), 1u);
}

TEST_F(AgentTest, StopSendsGoodbyeAndIsPromptWithoutADaemon) {
  Connect();
  agent_->RequestStop("bye now");
  std::optional<wire::Goodbye> goodbye = daemon_->ReceiveA<wire::Goodbye>();
  ASSERT_TRUE(goodbye.has_value());
  EXPECT_EQ(goodbye->reason, "bye now");
  EXPECT_TRUE(agent_->WaitStopped(kWaitMs));
  agent_->Join();
  agent_.reset();

  daemon_.reset();
  StartAgent();
  agent_->RequestStop("no daemon");
  EXPECT_TRUE(agent_->WaitStopped(kWaitMs));
}

TEST_F(AgentTest, ARefusedHelloIsReportedOnceAndRetriedOnlyAfterTheLongestBackoff) {
  std::mutex mu;
  std::vector<std::string> reports;
  report_ = [&](const std::string& text) {
    std::lock_guard lock(mu);
    reports.push_back(text);
  };
  StartAgent();
  const wire::HelloRejected denied{
      .reason = static_cast<int32_t>(wire::RejectReason::kPermissionDenied),
      .message = "uid 1000 may not attach (not in ipc.allowed_uids)",
      .protocol_major = wire::kProtocolMajor,
      .protocol_minor = wire::kProtocolMinor};
  const wire::HelloRejected skew{
      .reason = static_cast<int32_t>(wire::RejectReason::kProtocolVersion),
      .message = "client speaks IPC protocol 1.2, daemon speaks 2.0",
      .protocol_major = 2,
      .protocol_minor = 0};
  std::chrono::steady_clock::time_point refused_at;
  for (const wire::HelloRejected& rejection : {denied, denied, skew}) {
    ASSERT_TRUE(daemon_->Accept());
    ASSERT_TRUE(daemon_->ReceiveA<wire::Hello>().has_value());
    if (agent_->rejections() > 0) {
      // backoff_max_ms, not the 5ms initial backoff of a failed connect.
      EXPECT_GE(std::chrono::steady_clock::now() - refused_at, std::chrono::milliseconds(100));
    }
    refused_at = std::chrono::steady_clock::now();
    ASSERT_TRUE(daemon_->Send(rejection));
    ASSERT_TRUE(daemon_->WaitPeerClosed());
  }
  ASSERT_TRUE(WaitFor([&] { return agent_->rejections() == 3; }));
  EXPECT_FALSE(agent_->connected());
  EXPECT_NE(agent_->last_error().find("client speaks IPC protocol 1.2, daemon speaks 2.0"),
            std::string::npos);
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(reports.size(), 2u);  // the repeated refusal is not reported again
    EXPECT_NE(reports[0].find("gpuctld refused this process: uid 1000 may not attach"),
              std::string::npos);
    EXPECT_NE(reports[0].find("retrying every 100ms"), std::string::npos);
    EXPECT_NE(reports[1].find("daemon 2.0"), std::string::npos) << reports[1];
  }
  // A daemon that accepts again gets the process back.
  ASSERT_TRUE(daemon_->Handshake());
  EXPECT_TRUE(WaitFor([&] { return agent_->connected(); }));
}

TEST_F(AgentTest, HelloRejectedAfterTheHandshakeIsAProtocolError) {
  Connect();
  ASSERT_TRUE(daemon_->Send(wire::HelloRejected{.message = "late"}));
  EXPECT_TRUE(daemon_->WaitPeerClosed());
  EXPECT_EQ(agent_->rejections(), 0u);
}

}  // namespace
}  // namespace gpuctl::client
