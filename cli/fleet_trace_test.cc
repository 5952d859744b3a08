// `gpuctl trace` across several fake gpuctlds: some answering, some
// refusing, some slow, some down.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "cli/exit_codes.h"
#include "cli/fake_gpuctl_service_test_util.h"
#include "cli/proto_time.h"
#include "cli/selector.h"
#include "daemon/common/trace_id.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
using ::gpuctl::cli::testing::DeadTarget;
using ::gpuctl::cli::testing::FakeGpuctlService;
using ::gpuctl::cli::testing::FakeProcess;
using ::gpuctl::cli::testing::FakeResult;
using ::gpuctl::cli::testing::FakeServer;
using ::gpuctl::cli::testing::ManualInterrupts;
using ::gpuctl::cli::testing::ScriptedTrace;
using ::gpuctl::cli::testing::SilentListener;
using ::gpuctl::cli::testing::TestConsole;
using ::gpuctl::cli::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr v1::CaptureStatus kOk = v1::CAPTURE_STATUS_OK;

absl::Time ToTime(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

// A regex for a table row holding `cells` in order, separated by spaces.
std::string RowRegex(const std::vector<std::string>& cells) {
  std::string pattern;
  for (const std::string& cell : cells) {
    if (!pattern.empty()) pattern += " +";
    for (char c : cell) {
      if (std::string_view(".[]()*+?{}|^$\\").find(c) != std::string_view::npos) pattern += '\\';
      pattern += c;
    }
  }
  return pattern;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> ListDir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// A fake daemon named `name` with two ranks, serving their files and a
// manifest under any trace id it was asked for.
class FakeHost {
 public:
  FakeHost(std::string name, int first_pid, int first_rank) : name_(std::move(name)) {
    for (int i = 0; i < 2; ++i) {
      processes_.push_back(FakeProcess(first_pid + i, first_rank + i, name_));
      results_.push_back(FakeResult(first_pid + i, first_rank + i, kOk, "", name_));
    }
    Answer();
  }
  // Completes with `results` (default: every process ok).
  void Answer() {
    server_.service().trace = [this](grpc::ServerContext* context, const v1::TraceRequest& request,
                                     grpc::ServerWriter<v1::TraceEvent>* writer) {
      Store(request.trace_id());
      return ScriptedTrace(processes_, results_, true, name_)(context, request, writer);
    };
  }
  void Store(const std::string& id) {
    auto& files = server_.service().files[id];
    files["manifest.json"] = absl::StrCat("{\"host\":\"", name_, "\"}");
    for (const v1::ProcessResult& r : results_) {
      if (!r.file().empty()) files[r.file()] = absl::StrCat(name_, " pid ", r.pid());
    }
  }
  FakeGpuctlService& service() { return server_.service(); }
  std::string target() const { return server_.target(); }
  std::vector<v1::TraceRequest> requests() { return server_.service().trace_requests(); }
  std::vector<v1::ProcessResult>& results() { return results_; }
  std::vector<v1::ProcessInfo>& processes() { return processes_; }

 private:
  std::string name_;
  std::vector<v1::ProcessInfo> processes_;
  std::vector<v1::ProcessResult> results_;
  FakeServer server_;
};

class CliFleetTraceTest : public ::testing::Test {
 protected:
  CliFleetTraceTest() {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-fleet-test-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  ~CliFleetTraceTest() override { fs::remove_all(dir_); }

  int Run(std::vector<std::string> args) {
    CliEnv env = console_.env();
    env.interrupts = &interrupts_;
    if (trace_margin_.has_value()) env.trace_margin = *trace_margin_;
    if (trace_result_limit_.has_value()) env.trace_result_limit = *trace_result_limit_;
    args.insert(args.begin(), "trace");
    args.insert(args.end(), {"-o", dir_});
    return RunCli(args, env);
  }
  nlohmann::json Json() { return nlohmann::json::parse(console_.out.str()); }

  FakeHost node1_{"node1", 100, 0};
  FakeHost node2_{"node2", 200, 2};
  TestConsole console_;
  ManualInterrupts interrupts_;
  std::string dir_;
  std::optional<absl::Duration> trace_margin_;
  std::optional<absl::Duration> trace_result_limit_;
};

// A daemon still ingesting after the window: TraceStarted with a window that
// is already over, then PROCESSING for the process every `every` until
// `busy` has passed (or forever when `busy` is infinite) or the caller
// cancels; then the result and TraceCompleted.
FakeGpuctlService::TraceFn SlowIngest(const v1::ProcessInfo& process,
                                      const v1::ProcessResult& result, absl::Duration every,
                                      absl::Duration busy) {
  return [=](grpc::ServerContext* context, const v1::TraceRequest& request,
             grpc::ServerWriter<v1::TraceEvent>* writer) {
    const absl::Time now = absl::Now();
    v1::TraceEvent started;
    started.mutable_started()->set_trace_id(request.trace_id());
    started.mutable_started()->set_host("node1");
    ToProtoTime(now, started.mutable_started()->mutable_start_time());
    ToProtoTime(now, started.mutable_started()->mutable_end_time());
    ToProtoTime(now, started.mutable_started()->mutable_received_at());
    *started.mutable_started()->add_processes() = process;
    if (!writer->Write(started)) return grpc::Status::CANCELLED;
    while (absl::Now() - now < busy) {
      if (context->IsCancelled()) return grpc::Status::CANCELLED;
      v1::TraceEvent progress;
      progress.mutable_progress()->set_pid(process.pid());
      progress.mutable_progress()->set_phase(v1::PROCESS_PHASE_PROCESSING);
      progress.mutable_progress()->set_message("converting");
      if (every > absl::ZeroDuration() && !writer->Write(progress)) {
        return grpc::Status::CANCELLED;
      }
      absl::SleepFor(every > absl::ZeroDuration() ? every : absl::Milliseconds(20));
    }
    v1::TraceEvent done;
    *done.mutable_result() = result;
    writer->Write(done);
    v1::TraceEvent completed;
    completed.mutable_completed()->set_trace_id(request.trace_id());
    writer->Write(completed);
    return grpc::Status::OK;
  };
}

TEST_F(CliFleetTraceTest, OneIdOneInstantForEveryHostAndPartialFailureKeepsTraces) {
  // node1 answers clock probes on the test's (and the CLI's) clock; node2
  // is a gpuctld older than them.
  node1_.service().probe_clock = [](v1::ProbeClockResponse* response) {
    ToProtoTime(absl::Now(), response->mutable_daemon_time());
    return grpc::Status::OK;
  };
  const std::string dead = DeadTarget();
  const absl::Time begin = absl::Now();
  EXPECT_EQ(Run({"--job", "42", "--duration", "2s", "--json", "--host", node1_.target(), "--host",
                 node2_.target(), "--host", dead}),
            kExitPartialFailure);

  ASSERT_EQ(node1_.requests().size(), 1u);
  ASSERT_EQ(node2_.requests().size(), 1u);
  const v1::TraceRequest r1 = node1_.requests()[0];
  const v1::TraceRequest r2 = node2_.requests()[0];
  EXPECT_TRUE(IsValidTraceId(r1.trace_id())) << r1.trace_id();
  EXPECT_EQ(r1.trace_id(), r2.trace_id());
  EXPECT_EQ(ToTime(r1.start_time()), ToTime(r2.start_time()));
  for (const v1::TraceRequest* r : {&r1, &r2}) {
    // The instant is read once, before any host is contacted; each
    // caller_time right before its host's request.
    EXPECT_GE(ToTime(r->start_time()), begin + absl::Milliseconds(500));
    EXPECT_LE(ToTime(r->start_time()), ToTime(r->caller_time()) + absl::Milliseconds(500));
    EXPECT_EQ(r->selector().job_id(), "42");
    EXPECT_EQ(r->duration().seconds(), 2);
  }
  // One clock on both ends: the daemon read it between the probe's send and
  // its answer, so the midpoint is within half the round trip of zero.
  ASSERT_TRUE(r1.has_caller_clock());
  const absl::Duration round_trip = FromProtoDuration(r1.caller_clock().round_trip());
  EXPECT_GT(round_trip, absl::ZeroDuration());
  EXPECT_LT(round_trip, absl::Seconds(1));
  EXPECT_LE(absl::AbsDuration(FromProtoDuration(r1.caller_clock().offset())), round_trip / 2);
  // Up to four; fewer when a later one ran far slower than the fastest.
  EXPECT_GE(r1.caller_clock().probes(), 1u);
  EXPECT_LE(r1.caller_clock().probes(), 4u);
  EXPECT_LE(node1_.service().probes(), 4);
  EXPECT_FALSE(r2.has_caller_clock());
  EXPECT_EQ(node2_.service().probes(), 1);

  nlohmann::json json = Json();
  const std::string id = r1.trace_id();
  EXPECT_EQ(json["traceId"], id);
  ASSERT_EQ(json["hosts"].size(), 3u);
  EXPECT_EQ(json["hosts"][0]["host"], node1_.target());
  EXPECT_EQ(json["hosts"][0]["hostname"], "node1");
  EXPECT_EQ(json["hosts"][0]["status"], "ok");
  EXPECT_EQ(json["hosts"][0]["error"], "");
  EXPECT_EQ(json["hosts"][1]["host"], node2_.target());
  EXPECT_EQ(json["hosts"][1]["hostname"], "node2");
  EXPECT_EQ(json["hosts"][1]["status"], "ok");
  EXPECT_EQ(json["hosts"][1]["results"].size(), 2u);
  EXPECT_EQ(json["hosts"][2]["host"], dead);
  EXPECT_EQ(json["hosts"][2]["hostname"], "");
  EXPECT_EQ(json["hosts"][2]["status"], "unreachable");
  EXPECT_THAT(json["hosts"][2]["error"].get<std::string>(), HasSubstr("cannot reach gpuctld"));
  EXPECT_TRUE(json["hosts"][2]["clock"].is_null());
  EXPECT_TRUE(json["hosts"][2]["results"].empty());
  // Each daemon's clock against the CLI's, measured on its request.
  EXPECT_EQ(json["hosts"][0]["clock"]["callerTime"].get<std::string>().size() > 0, true);
  EXPECT_EQ(json["hosts"][0]["clock"]["roundTrip"].get<std::string>().size() > 0, true);
  EXPECT_EQ(json["hosts"][0]["clock"]["midpointOffset"].get<std::string>().size() > 0, true);
  EXPECT_TRUE(json["hosts"][1]["clock"]["roundTrip"].is_null());
  EXPECT_TRUE(json["hosts"][1]["clock"]["midpointOffset"].is_null());

  // One directory; a manifest per host.
  const fs::path saved = fs::path(dir_) / id;
  EXPECT_EQ(json["savedTo"], saved.string());
  EXPECT_EQ(ListDir(saved),
            (std::vector<std::string>{"_gpuctl", "node1-rank0-pid100.json.gz",
                                      "node1-rank1-pid101.json.gz", "node2-rank2-pid200.json.gz",
                                      "node2-rank3-pid201.json.gz"}));
  EXPECT_EQ(ListDir(saved / "_gpuctl"), (std::vector<std::string>{"node1.json", "node2.json"}));
  EXPECT_EQ(ReadFile(saved / "_gpuctl" / "node2.json"), "{\"host\":\"node2\"}");
  EXPECT_EQ(ReadFile(saved / "node1-rank1-pid101.json.gz"), "node1 pid 101");
  EXPECT_THAT(json["hosts"][0]["files"],
              UnorderedElementsAre("_gpuctl/node1.json", "node1-rank0-pid100.json.gz",
                                   "node1-rank1-pid101.json.gz"));
  std::vector<v1::GetTraceRequest> gets = node1_.service().get_requests();
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_EQ(gets[0].trace_id(), id);
  EXPECT_THAT(gets[0].files(), UnorderedElementsAre("manifest.json", "node1-rank0-pid100.json.gz",
                                                    "node1-rank1-pid101.json.gz"));
}

TEST_F(CliFleetTraceTest, TableShowsEveryHostAndASummary) {
  node2_.service().trace = [](auto*, const auto&, auto*) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "duration above the 1s maximum");
  };
  node1_.results()[1] = FakeResult(101, 1, v1::CAPTURE_STATUS_BUSY, "another tool owns CUPTI");
  EXPECT_EQ(Run({"--job", "42", "--duration", "2s", "--host", node1_.target(), "--host",
                 node2_.target()}),
            kExitPartialFailure);
  const std::string out = console_.out.str();
  // Rows name hosts as contacted.
  EXPECT_THAT(out, ::testing::ContainsRegex(RowRegex(
                       {node1_.target(), "100", "0", "ok", "1100", "12.3 KiB", "node1-rank0"})));
  EXPECT_THAT(out, ::testing::ContainsRegex(
                       RowRegex({node1_.target(), "101", "1", "busy", "-", "-", "-"}) + "\n"));
  EXPECT_THAT(out, HasSubstr("    another tool owns CUPTI\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex(RowRegex({node2_.target(), "-", "-", "refused"})));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("    gpuctld at ", node2_.target(),
                                          " refused the request: duration above the 1s maximum")));
  EXPECT_THAT(out, HasSubstr("2 hosts: 1 failed, 1 refused; processes: 1 ok, 1 failed\n"));
  EXPECT_THAT(out, HasSubstr("saved to"));
  // Plain progress names the host on every line.
  const std::string err = console_.err.str();
  EXPECT_THAT(err, HasSubstr(absl::StrCat(node1_.target(), ": pid 100: capturing")));
  EXPECT_THAT(err, HasSubstr(absl::StrCat(node1_.target(), ": trace ")));
  EXPECT_THAT(err, HasSubstr(absl::StrCat(node2_.target(), ": refused: gpuctld at ")));
}

TEST_F(CliFleetTraceTest, ExitCodesFromHostOutcomes) {
  auto not_found = [](auto*, const auto&, auto*) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no attached process matches job \"42\"");
  };
  node1_.service().trace = not_found;
  node2_.service().trace = not_found;
  std::vector<std::string> both = {"--job",         "42",     "--duration",   "1s", "--host",
                                   node1_.target(), "--host", node2_.target()};
  EXPECT_EQ(Run(both), kExitNothingMatched);
  EXPECT_THAT(console_.err.str(), HasSubstr("no attached process matches job \"42\""));

  EXPECT_EQ(
      Run({"--job", "42", "--duration", "1s", "--host", DeadTarget(), "--host", DeadTarget()}),
      kExitDaemonError);
  // Nothing matched here, and the other host could not say.
  EXPECT_EQ(
      Run({"--job", "42", "--duration", "1s", "--host", node1_.target(), "--host", DeadTarget()}),
      kExitPartialFailure);

  node2_.Answer();
  EXPECT_EQ(Run(both), kExitPartialFailure);  // a host with nothing is a failed host
  node1_.Answer();
  EXPECT_EQ(Run(both), kExitOk) << console_.err.str();
}

TEST_F(CliFleetTraceTest, SlowHostTimesOutWithoutHoldingTheOthers) {
  FakeServer slow;
  slow.service().trace = [&slow](grpc::ServerContext* context, const v1::TraceRequest&,
                                 grpc::ServerWriter<v1::TraceEvent>*) {
    // Never answers; waits for the client to give up.
    if (WaitFor([&] { return context->IsCancelled(); })) slow.service().NoteCancelled();
    return grpc::Status::OK;
  };
  SilentListener silent;
  const absl::Time begin = absl::Now();
  EXPECT_EQ(Run({"--job", "42", "--duration", "1s", "--json", "--host-timeout", "1s", "--host",
                 slow.target(), "--host", node1_.target(), "--host", silent.target()}),
            kExitPartialFailure);
  EXPECT_LT(absl::Now() - begin, absl::Seconds(15));
  nlohmann::json json = Json();
  EXPECT_EQ(json["hosts"][0]["status"], "timed_out");
  EXPECT_THAT(json["hosts"][0]["error"].get<std::string>(),
              HasSubstr("did not start the trace within 1s"));
  EXPECT_EQ(json["hosts"][1]["status"], "ok");
  // The silent host accepts TCP but never speaks: no connection or no answer.
  const std::string silent_status = json["hosts"][2]["status"];
  EXPECT_TRUE(silent_status == "unreachable" || silent_status == "timed_out") << silent_status;
  EXPECT_TRUE(WaitFor([&] { return slow.service().cancelled() == 1; }));
}

TEST_F(CliFleetTraceTest, LongIngestIsWaitedForWhileTheDaemonReportsProgress) {
  // Ingest takes three margins; progress every fifth of one keeps it alive.
  trace_margin_ = absl::Milliseconds(500);
  node1_.service().trace = SlowIngest(node1_.processes()[0], node1_.results()[0],
                                      absl::Milliseconds(100), absl::Milliseconds(1500));
  EXPECT_EQ(Run({"--job", "42", "--duration", "1s", "--no-download", "--json", "--host",
                 node1_.target()}),
            kExitOk)
      << console_.err.str() << console_.out.str();
  EXPECT_EQ(Json()["hosts"][0]["status"], "ok");
}

TEST_F(CliFleetTraceTest, RepeatedProgressIsPrintedOnceInPlainOutput) {
  trace_margin_ = absl::Milliseconds(500);
  node1_.service().trace = SlowIngest(node1_.processes()[0], node1_.results()[0],
                                      absl::Milliseconds(50), absl::Milliseconds(400));
  EXPECT_EQ(Run({"--job", "42", "--duration", "1s", "--no-download", "--host", node1_.target()}),
            kExitOk)
      << console_.err.str();
  const std::string err = console_.err.str();
  size_t lines = 0;
  for (size_t at = err.find("pid 100: processing (converting)"); at != std::string::npos;
       at = err.find("pid 100: processing (converting)", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << err;
}

TEST_F(CliFleetTraceTest, DaemonSilentAfterTheWindowTimesOutAfterTheMargin) {
  trace_margin_ = absl::Milliseconds(500);
  node1_.service().trace = SlowIngest(node1_.processes()[0], node1_.results()[0],
                                      absl::ZeroDuration(), absl::InfiniteDuration());
  const absl::Time begin = absl::Now();
  EXPECT_EQ(Run({"--job", "42", "--duration", "1s", "--no-download", "--json", "--host",
                 node1_.target()}),
            kExitPartialFailure)
      << console_.err.str() << console_.out.str();
  EXPECT_LT(absl::Now() - begin, absl::Seconds(15));
  nlohmann::json json = Json();
  EXPECT_EQ(json["hosts"][0]["status"], "timed_out");
  EXPECT_THAT(json["hosts"][0]["error"].get<std::string>(), HasSubstr("no progress for 500ms"));
}

TEST_F(CliFleetTraceTest, BusyDaemonIsGivenUpAtTheTraceTimeLimit) {
  trace_margin_ = absl::Milliseconds(500);
  trace_result_limit_ = absl::Seconds(1);
  node1_.service().trace = SlowIngest(node1_.processes()[0], node1_.results()[0],
                                      absl::Milliseconds(100), absl::InfiniteDuration());
  const absl::Time begin = absl::Now();
  EXPECT_EQ(Run({"--job", "42", "--duration", "1s", "--no-download", "--json", "--host",
                 node1_.target()}),
            kExitPartialFailure)
      << console_.err.str() << console_.out.str();
  EXPECT_LT(absl::Now() - begin, absl::Seconds(15));
  nlohmann::json json = Json();
  EXPECT_EQ(json["hosts"][0]["status"], "timed_out");
  EXPECT_THAT(json["hosts"][0]["error"].get<std::string>(),
              HasSubstr("still busy at the trace's time limit"));
}

TEST_F(CliFleetTraceTest, LaterHostsDoNotWaitForEarlierWindows) {
  // One dispatch slot. node1 holds its window open until node2 has its
  // request: if dispatch waited for windows, node2 would never get it.
  std::atomic<bool> node2_seen{false};
  node1_.service().trace = [&](grpc::ServerContext* context, const v1::TraceRequest& request,
                               grpc::ServerWriter<v1::TraceEvent>* writer) {
    v1::TraceEvent started;
    started.mutable_started()->set_trace_id(request.trace_id());
    started.mutable_started()->set_host("node1");
    *started.mutable_started()->add_processes() = node1_.processes()[0];
    writer->Write(started);
    node2_seen = WaitFor([&] { return !node2_.requests().empty(); });
    v1::TraceEvent result;
    *result.mutable_result() = node1_.results()[0];
    writer->Write(result);
    v1::TraceEvent done;
    done.mutable_completed()->set_trace_id(request.trace_id());
    writer->Write(done);
    return grpc::Status::OK;
  };
  EXPECT_EQ(Run({"--job", "42", "--duration", "1s", "--no-download", "--parallel", "1", "--host",
                 node1_.target(), "--host", node2_.target()}),
            kExitOk)
      << console_.err.str();
  EXPECT_TRUE(node2_seen);
}

TEST_F(CliFleetTraceTest, DispatchIsBoundedByParallel) {
  // Each fake holds TraceStarted until two requests have been in dispatch
  // at once (or a while passed): with --parallel 2 the most is exactly 2.
  std::vector<std::unique_ptr<FakeServer>> servers;
  std::atomic<int> in_dispatch{0};
  std::atomic<int> most{0};
  std::vector<std::string> args = {"--job",         "42",         "--duration", "1s",
                                   "--no-download", "--parallel", "2"};
  for (int i = 0; i < 4; ++i) {
    servers.push_back(std::make_unique<FakeServer>());
    servers.back()->service().trace = [&, i](grpc::ServerContext*, const v1::TraceRequest& request,
                                             grpc::ServerWriter<v1::TraceEvent>* writer) {
      int now = ++in_dispatch;
      for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
      }
      WaitFor([&] { return most.load() >= 2; }, absl::Seconds(5));
      v1::TraceEvent started;
      started.mutable_started()->set_trace_id(request.trace_id());
      started.mutable_started()->set_host(absl::StrCat("n", i));
      --in_dispatch;
      writer->Write(started);
      v1::TraceEvent done;
      done.mutable_completed()->set_trace_id(request.trace_id());
      writer->Write(done);
      return grpc::Status::OK;
    };
    args.insert(args.end(), {"--host", servers.back()->target()});
  }
  EXPECT_EQ(Run(args), kExitOk) << console_.err.str();
  EXPECT_EQ(most.load(), 2);
}

TEST_F(CliFleetTraceTest, InterruptCancelsEveryHostsStream) {
  std::atomic<int> started_hosts{0};
  auto hold = [&](FakeHost& host) {
    return [&](grpc::ServerContext* context, const v1::TraceRequest& request,
               grpc::ServerWriter<v1::TraceEvent>* writer) {
      v1::TraceEvent started;
      started.mutable_started()->set_trace_id(request.trace_id());
      *started.mutable_started()->add_processes() = host.processes()[0];
      writer->Write(started);
      if (++started_hosts == 2) interrupts_.Fire();
      if (WaitFor([&] { return context->IsCancelled(); })) host.service().NoteCancelled();
      return grpc::Status::OK;
    };
  };
  node1_.service().trace = hold(node1_);
  node2_.service().trace = hold(node2_);
  EXPECT_EQ(Run({"--job", "42", "--duration", "5s", "--host", node1_.target(), "--host",
                 node2_.target()}),
            kExitInterrupted);
  EXPECT_THAT(console_.err.str(), HasSubstr("cancelled; the daemons stop the capture"));
  EXPECT_EQ(console_.out.str(), "");
  EXPECT_TRUE(WaitFor([&] { return node1_.service().cancelled() == 1; }));
  EXPECT_TRUE(WaitFor([&] { return node2_.service().cancelled() == 1; }));
  EXPECT_TRUE(node1_.service().get_requests().empty());
}

TEST_F(CliFleetTraceTest, IterationsPickOneStartStepAcrossHosts) {
  auto steps = [](FakeHost& host, const std::string& name, uint64_t step, absl::Duration period) {
    v1::ListProcessesResponse& list = host.service().processes;
    list.set_host(name);
    for (v1::ProcessInfo p : host.processes()) {
      p.set_current_step(step++);
      p.mutable_step_period()->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(period)));
      *list.add_processes() = p;
    }
  };
  steps(node1_, "node1", 1186, absl::Milliseconds(100));  // 1186, 1187
  steps(node2_, "node2", 990, absl::Milliseconds(40));
  ASSERT_EQ(Run({"--rank", "0-3", "--iterations", "10", "--step-roundup", "100", "--host",
                 node1_.target(), "--host", node2_.target()}),
            kExitOk)
      << console_.err.str();
  // Margin auto: 500 ms / 40 ms -> 13 + 1 = 14; (1187 + 14) / 100 + 1 = 13 -> 1300.
  EXPECT_THAT(console_.out.str(),
              HasSubstr("start step 1300: steps 1300-1309 (largest current step 1187, pid 101 on "
                        "node1; margin 14 (auto: fastest step period 40ms), roundup 100)\n"));
  for (FakeHost* host : {&node1_, &node2_}) {
    ASSERT_EQ(host->service().list_processes_requests().size(), 1u);
    EXPECT_EQ(RankSetText(host->service().list_processes_requests()[0].selector().ranks()), "0-3");
    ASSERT_EQ(host->requests().size(), 1u);
    const v1::TraceRequest r = host->requests()[0];
    EXPECT_EQ(r.iterations(), 10u);
    EXPECT_EQ(r.start_step(), 1300u);
    EXPECT_TRUE(r.has_start_step());
    EXPECT_EQ(r.step_roundup(), 100u);
    EXPECT_FALSE(r.has_start_time());
    EXPECT_FALSE(r.has_duration());
    EXPECT_TRUE(r.has_caller_time());
  }
}

TEST_F(CliFleetTraceTest, IterationsInJsonModeAndAHostThatCannotList) {
  node1_.service().unary_error = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no");
  ASSERT_EQ(Run({"--job", "42", "--iterations", "5", "--step-margin", "0", "--duration", "30s",
                 "--json", "--host", node1_.target(), "--host", node2_.target()}),
            kExitPartialFailure);
  // No step anywhere: -1 + 0 < 0 -> 0.
  EXPECT_THAT(console_.err.str(), HasSubstr("start step 0: steps 0-4 (no selected process"));
  EXPECT_TRUE(node1_.requests().empty());  // left out of the trace
  ASSERT_EQ(node2_.requests().size(), 1u);
  EXPECT_EQ(node2_.requests()[0].duration().seconds(), 30);
  nlohmann::json json = Json();
  EXPECT_EQ(json["window"], "iterations");
  EXPECT_EQ(json["iterations"], 5);
  EXPECT_EQ(json["startStep"], "0");
  EXPECT_TRUE(json["startTime"].is_null());
  EXPECT_EQ(json["hosts"][0]["status"], "refused");
  EXPECT_THAT(json["hosts"][0]["error"].get<std::string>(), HasSubstr("listing its processes"));
  EXPECT_EQ(json["hosts"][1]["status"], "ok");
  EXPECT_EQ(json["hosts"][1]["target"], "0");
}

TEST_F(CliFleetTraceTest, GivenStartStepSkipsTheGather) {
  ASSERT_EQ(Run({"--job", "42", "--iterations", "3", "--start-step", "5000", "--no-download",
                 "--host", node1_.target()}),
            kExitOk)
      << console_.err.str();
  EXPECT_TRUE(node1_.service().list_processes_requests().empty());
  ASSERT_EQ(node1_.requests().size(), 1u);
  EXPECT_EQ(node1_.requests()[0].start_step(), 5000u);
  EXPECT_THAT(console_.out.str(), HasSubstr("start step 5000: steps 5000-5002 (given)"));
}

TEST_F(CliFleetTraceTest, SameHostNamesGetDistinctFiles) {
  FakeHost twin("node1", 100, 0);  // same name, same file names
  ASSERT_EQ(Run({"--job", "42", "--duration", "1s", "--json", "--host", node1_.target(), "--host",
                 twin.target()}),
            kExitOk)
      << console_.err.str();
  nlohmann::json json = Json();
  const fs::path saved = fs::path(dir_) / json["traceId"].get<std::string>();
  auto key = [](const std::string& target) {
    std::string k = target;
    std::replace(k.begin(), k.end(), ':', '_');
    return k;
  };
  const std::string first = key(node1_.target());
  const std::string second = key(twin.target());
  EXPECT_EQ(ListDir(saved).size(), 5u);
  EXPECT_TRUE(fs::exists(saved / "_gpuctl" / (first + ".json")));
  EXPECT_TRUE(fs::exists(saved / "_gpuctl" / (second + ".json")));
  EXPECT_TRUE(fs::exists(saved / "node1-rank0-pid100.json.gz"));
  EXPECT_EQ(ReadFile(saved / (second + "-node1-rank0-pid100.json.gz")), "node1 pid 100");
  EXPECT_EQ(json["hosts"][1]["results"][0]["file"], "node1-rank0-pid100.json.gz");
  EXPECT_THAT(json["hosts"][1]["files"],
              ::testing::Contains(second + "-node1-rank0-pid100.json.gz"));
}

TEST_F(CliFleetTraceTest, LateJoinerWithoutResultIsMissing) {
  node1_.service().trace = [&](grpc::ServerContext* context, const v1::TraceRequest& request,
                               grpc::ServerWriter<v1::TraceEvent>* writer) {
    v1::TraceEvent joined;
    joined.mutable_progress()->set_pid(150);
    joined.mutable_progress()->set_phase(v1::PROCESS_PHASE_REQUESTED);
    *joined.mutable_progress()->mutable_joined() = FakeProcess(150, 7);
    node1_.Store(request.trace_id());
    grpc::Status status =
        ScriptedTrace(node1_.processes(), node1_.results(), false)(context, request, writer);
    writer->Write(joined);
    v1::TraceEvent done;
    done.mutable_completed()->set_trace_id(request.trace_id());
    writer->Write(done);
    return status;
  };
  EXPECT_EQ(Run({"--job", "42", "--duration", "1s", "--json", "--host", node1_.target()}),
            kExitPartialFailure);
  nlohmann::json json = Json();
  EXPECT_EQ(json["hosts"][0]["missingPids"], nlohmann::json::array({150}));
  EXPECT_EQ(json["hosts"][0]["processesFailed"], 1);
}

TEST_F(CliFleetTraceTest, TerminalShowsALinePerHost) {
  CliEnv env = console_.env();
  env.err_is_terminal = true;
  env.terminal_columns = 120;
  const std::string dead = DeadTarget();
  EXPECT_EQ(RunCli({"trace", "--job", "42", "--duration", "1s", "--no-download", "--host",
                    node1_.target(), "--host", dead},
                   env),
            kExitPartialFailure);
  const std::string err = console_.err.str();
  EXPECT_THAT(err, HasSubstr(": 2 hosts, window 2s\n"));
  EXPECT_THAT(err, HasSubstr(absl::StrCat("\x1b[2K  ", node1_.target())));
  EXPECT_THAT(err, HasSubstr("2 selected: "));
  EXPECT_THAT(err, HasSubstr("\x1b[2K  window "));
  EXPECT_THAT(err, ::testing::ContainsRegex("unreachable: cannot reach gpuctld at"));
  // Header, window and two hosts erased at the end.
  EXPECT_THAT(err, HasSubstr("\x1b[4F\x1b[2K\n\x1b[2K\n\x1b[2K\n\x1b[2K\n\x1b[4F"));
  EXPECT_THAT(console_.out.str(),
              ::testing::ContainsRegex(RowRegex({node1_.target(), "100", "0", "ok"})));
}

}  // namespace
}  // namespace gpuctl::cli
