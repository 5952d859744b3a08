#include "daemon/rpc/grpc_service.h"

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "daemon/common/event_loop.h"
#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/thread_pool_executor.h"
#include "daemon/core/testing/mock_daemon_core.h"
#include "daemon/rpc/get_trace_reactor.h"
#include "daemon/rpc/testing/in_memory_trace_store.h"
#include "daemon/rpc/testing/raw_call.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Property;

constexpr absl::Duration kWait = absl::Seconds(30);

class GrpcServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    loop_thread_ = std::thread([this] { loop_->Run(); });
    service_ = std::make_unique<GrpcService>(&core_, loop_.get(), &store_, &io_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    stub_ = v1::Gpuctl::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    // In-flight calls complete through the loop, so it runs until here.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
    server_.reset();
    loop_->Quit();
    loop_thread_.join();
    io_.Shutdown();
  }
  void RunOnLoop(absl::AnyInvocable<void() &&> fn) {
    absl::Notification done;
    loop_->Post([&] {
      std::move(fn)();
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  }
  // The core accepts the next trace as "t-1" and hands its observer over.
  void ExpectStartTrace(absl::Notification* started) {
    EXPECT_CALL(core_, StartTrace(_, _, _))
        .WillOnce([this, started](const v1::TraceRequest&, const v1::TraceTrigger& trigger,
                                  std::shared_ptr<TraceObserver> o) {
          EXPECT_TRUE(loop_->IsLoopThread());
          trigger_ = trigger;
          observer_ = std::move(o);
          started->Notify();
          return std::string("t-1");
        });
  }
  static v1::TraceEvent Progress(int pid) {
    v1::TraceEvent event;
    event.mutable_progress()->set_pid(pid);
    event.mutable_progress()->set_phase(v1::PROCESS_PHASE_CAPTURING);
    return event;
  }
  static grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ctx;
  }

  ::testing::StrictMock<MockDaemonCore> core_;
  gpuctl::testing::FakeClock clock_;  // outlives the service
  testing::InMemoryTraceStore store_;
  ThreadPoolExecutor io_{2};
  std::unique_ptr<EventLoop> loop_;
  std::thread loop_thread_;
  std::unique_ptr<GrpcService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<v1::Gpuctl::Stub> stub_;
  std::shared_ptr<TraceObserver> observer_;  // loop thread only
  v1::TraceTrigger trigger_;                 // loop thread only
};

TEST_F(GrpcServiceTest, TraceStreamsEveryEventInOrderThenTheCoreStatus) {
  absl::Notification started;
  ExpectStartTrace(&started);
  grpc::ClientContext ctx;
  v1::TraceRequest request;
  request.set_trace_id("t-1");
  auto reader = stub_->Trace(WithDeadline(&ctx), request);
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWait));
  constexpr int kEvents = 300;
  RunOnLoop([&] {
    // The core learns who asked: the manifest records it.
    EXPECT_EQ(trigger_.kind(), v1::TRIGGER_KIND_ON_DEMAND);
    EXPECT_THAT(trigger_.requested_by(), ::testing::StartsWith("ipv4:127.0.0.1:"));
    for (int i = 0; i < kEvents; ++i) observer_->OnEvent(Progress(i));
    observer_->OnDone(absl::OkStatus());
    observer_.reset();
  });
  v1::TraceEvent event;
  int next = 0;
  while (reader->Read(&event)) EXPECT_EQ(event.progress().pid(), next++);
  EXPECT_EQ(next, kEvents);
  grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcServiceTest, TraceEndsWithTheMappedStatusAfterQueuedEvents) {
  absl::Notification started;
  ExpectStartTrace(&started);
  grpc::ClientContext ctx;
  auto reader = stub_->Trace(WithDeadline(&ctx), v1::TraceRequest());
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWait));
  RunOnLoop([&] {
    observer_->OnEvent(Progress(1));
    observer_->OnEvent(Progress(2));
    observer_->OnDone(absl::DeadlineExceededError("no result from pid 2"));
    observer_.reset();
  });
  std::vector<int> pids;
  v1::TraceEvent event;
  while (reader->Read(&event)) pids.push_back(event.progress().pid());
  EXPECT_THAT(pids, ElementsAre(1, 2));
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status.error_message(), "no result from pid 2");
}

TEST_F(GrpcServiceTest, RefusedTraceFinishesWithTheMappedStatus) {
  const std::pair<absl::Status, grpc::StatusCode> cases[] = {
      {absl::InvalidArgumentError("duration is required"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::NotFoundError("no process matches on host h1"), grpc::StatusCode::NOT_FOUND},
      {absl::ResourceExhaustedError("too many traces"), grpc::StatusCode::RESOURCE_EXHAUSTED},
  };
  for (const auto& [error, code] : cases) {
    EXPECT_CALL(core_, StartTrace(_, _, _)).WillOnce(::testing::Return(error));
    grpc::ClientContext ctx;
    auto reader = stub_->Trace(WithDeadline(&ctx), v1::TraceRequest());
    v1::TraceEvent event;
    EXPECT_FALSE(reader->Read(&event));
    grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), code);
    EXPECT_EQ(status.error_message(), error.message());
  }
}

TEST_F(GrpcServiceTest, CancellingTheCallCancelsTheTraceInTheCore) {
  absl::Notification started;
  ExpectStartTrace(&started);
  absl::Notification cancelled;
  EXPECT_CALL(core_, CancelTrace(absl::string_view("t-1"), _))
      .WillOnce([&](absl::string_view, const v1::TraceCancellation& why) {
        EXPECT_TRUE(loop_->IsLoopThread());
        // Who: the caller as the daemon sees it, its address.
        EXPECT_THAT(why.cancelled_by(), ::testing::StartsWith("ipv4:127.0.0.1:"));
        EXPECT_THAT(why.reason(), ::testing::HasSubstr("cancelled its Trace call"));
        // The core's contract: OnDone still follows a cancel.
        observer_->OnEvent(Progress(99));
        observer_->OnDone(absl::CancelledError("cancelled by the caller"));
        observer_.reset();
        cancelled.Notify();
      });
  grpc::ClientContext ctx;
  auto reader = stub_->Trace(WithDeadline(&ctx), v1::TraceRequest());
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWait));
  RunOnLoop([&] { observer_->OnEvent(Progress(1)); });
  v1::TraceEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.progress().pid(), 1);
  ctx.TryCancel();
  ASSERT_TRUE(cancelled.WaitForNotificationWithTimeout(kWait));
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(GrpcServiceTest, ListProcessesAndGetStatusRunOnTheLoop) {
  EXPECT_CALL(core_, ListProcesses(Property(&v1::ListProcessesRequest::selector,
                                            Property(&v1::ProcessSelector::job_id, "j1"))))
      .WillOnce([this](const v1::ListProcessesRequest&) {
        EXPECT_TRUE(loop_->IsLoopThread());
        v1::ListProcessesResponse response;
        response.set_host("h1");
        response.add_processes()->set_pid(5);
        return response;
      });
  EXPECT_CALL(core_, GetStatus()).WillOnce([this] {
    EXPECT_TRUE(loop_->IsLoopThread());
    v1::GetStatusResponse response;
    response.set_daemon_version("1.2.3");
    response.set_attached_processes(4);
    return response;
  });
  grpc::ClientContext ctx1;
  v1::ListProcessesRequest list_request;
  list_request.mutable_selector()->set_job_id("j1");
  v1::ListProcessesResponse processes;
  ASSERT_TRUE(stub_->ListProcesses(WithDeadline(&ctx1), list_request, &processes).ok());
  EXPECT_EQ(processes.host(), "h1");
  ASSERT_EQ(processes.processes_size(), 1);
  EXPECT_EQ(processes.processes(0).pid(), 5);
  grpc::ClientContext ctx2;
  v1::GetStatusResponse status;
  ASSERT_TRUE(stub_->GetStatus(WithDeadline(&ctx2), v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.daemon_version(), "1.2.3");
  EXPECT_EQ(status.attached_processes(), 4u);
}

TEST_F(GrpcServiceTest, ListProcessesRefusalKeepsItsCodeAndMessage) {
  EXPECT_CALL(core_, ListProcesses(_)).WillOnce([](const v1::ListProcessesRequest&) {
    return absl::InvalidArgumentError("rank range 3-1 is empty: its first rank exceeds its last");
  });
  grpc::ClientContext ctx;
  v1::ListProcessesResponse processes;
  grpc::Status st =
      stub_->ListProcesses(WithDeadline(&ctx), v1::ListProcessesRequest(), &processes);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "rank range 3-1 is empty: its first rank exceeds its last");
}

TEST_F(GrpcServiceTest, ListTracesReturnsTheStoreAnswerOrItsMappedError) {
  v1::TraceManifest manifest;
  manifest.set_trace_id("t-9");
  ASSERT_TRUE(store_.PutManifest(manifest).ok());
  grpc::ClientContext ctx1;
  v1::ListTracesResponse response;
  ASSERT_TRUE(stub_->ListTraces(WithDeadline(&ctx1), v1::ListTracesRequest(), &response).ok());
  ASSERT_EQ(response.traces_size(), 1);
  EXPECT_EQ(response.traces(0).trace_id(), "t-9");

  store_.set_list_error(absl::UnavailableError("disk gone"));
  grpc::ClientContext ctx2;
  grpc::Status status = stub_->ListTraces(WithDeadline(&ctx2), v1::ListTracesRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "disk gone");

  grpc::ClientContext ctx3;
  v1::ListTracesRequest too_big;
  too_big.set_page_size(5000);
  EXPECT_EQ(stub_->ListTraces(WithDeadline(&ctx3), too_big, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// Bytes that are not the method's request type, sent as they are: each
// gets INVALID_ARGUMENT naming the method and the type, and the core is
// never asked (StrictMock).
TEST_F(GrpcServiceTest, RequestsThatDoNotParseGetInvalidArgumentNamingTheType) {
  struct Case {
    std::string method;
    std::string type;
    std::string bytes;
    std::string why;
  };
  // An 11-byte varint: no tag is that long.
  const std::string garbage(11, '\xff');
  // Field 1, 16 bytes long, of which 3 arrived.
  const std::string truncated(
      "\x0a\x10"
      "abc",
      5);
  const std::string wire_format = "not protobuf wire format";
  std::vector<Case> cases;
  for (const auto& [method, type] :
       std::vector<std::pair<std::string, std::string>>{{"Trace", "TraceRequest"},
                                                        {"ListProcesses", "ListProcessesRequest"},
                                                        {"ListTraces", "ListTracesRequest"},
                                                        {"GetTrace", "GetTraceRequest"},
                                                        {"GetStatus", "GetStatusRequest"},
                                                        {"ProbeClock", "ProbeClockRequest"}}) {
    cases.push_back({method, type, garbage, wire_format});
    cases.push_back({method, type, truncated, wire_format});
  }
  // A string field holding the byte 0xff, at the top or nested.
  cases.push_back({"Trace", "TraceRequest", std::string("\x1a\x01\xff", 3),
                   "field trace_id is not valid UTF-8"});
  cases.push_back({"ListProcesses", "ListProcessesRequest", std::string("\x0a\x03\x0a\x01\xff", 5),
                   "field selector: field job_id is not valid UTF-8"});
  cases.push_back({"ListTraces", "ListTracesRequest", std::string("\x12\x01\xff", 3),
                   "field page_token is not valid UTF-8"});
  cases.push_back({"GetTrace", "GetTraceRequest", std::string("\x0a\x01\xff", 3),
                   "field trace_id is not valid UTF-8"});
  cases.push_back({"GetTrace", "GetTraceRequest", std::string("\x0a\x01t\x12\x02\xc3\x28", 7),
                   "field files is not valid UTF-8"});
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials());
  for (const Case& c : cases) {
    grpc::Status status = testing::RawCall(channel, "/gpuctl.v1.Gpuctl/" + c.method, c.bytes);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << c.method << ": " << status.error_code() << " " << status.error_message();
    EXPECT_THAT(status.error_message(),
                HasSubstr(absl::StrCat(c.method, " request: not a valid gpuctl.v1.", c.type)));
    EXPECT_THAT(status.error_message(), HasSubstr(c.why)) << c.method;
  }
}

// Answered from the service's clock on gRPC's thread: the (strict) core
// is not asked, and the loop's queue adds nothing to the round trip.
TEST_F(GrpcServiceTest, ProbeClockAnswersTheServicesClockAtReceipt) {
  clock_.Set(absl::FromUnixSeconds(1'800'000'000) + absl::Nanoseconds(7));
  service_->set_clock(&clock_);
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    v1::ProbeClockResponse response;
    ASSERT_TRUE(stub_->ProbeClock(WithDeadline(&ctx), {}, &response).ok());
    EXPECT_EQ(response.daemon_time().seconds(), 1'800'000'000 + i);
    EXPECT_EQ(response.daemon_time().nanos(), 7);
    clock_.Advance(absl::Seconds(1));
  }
}

TEST_F(GrpcServiceTest, RawMethodsStillAnswerWellFormedRequests) {
  EXPECT_CALL(core_, GetStatus()).WillOnce([] {
    v1::GetStatusResponse response;
    response.set_host("h1");
    return response;
  });
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials());
  std::vector<std::string> replies;
  grpc::Status status = testing::RawCall(channel, "/gpuctl.v1.Gpuctl/GetStatus", "", &replies);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(replies.size(), 1u);
  v1::GetStatusResponse response;
  ASSERT_TRUE(response.ParseFromString(replies[0]));
  EXPECT_EQ(response.host(), "h1");
}

// A 10 KiB trace id or file name is quoted as an excerpt; whatever the
// store says, the message a client gets stays under 1 KiB.
TEST_F(GrpcServiceTest, MessagesQuoteBoundedExcerptsOfWhatTheyReject) {
  const std::string huge(10 << 10, 'a');
  for (const bool as_file : {false, true}) {
    v1::GetTraceRequest request;
    request.set_trace_id(as_file ? "t-2" : huge);
    if (as_file) request.add_files(huge);
    grpc::ClientContext ctx;
    auto reader = stub_->GetTrace(WithDeadline(&ctx), request);
    v1::TraceChunk chunk;
    while (reader->Read(&chunk)) {
    }
    grpc::Status status = reader->Finish();
    EXPECT_FALSE(status.ok());
    EXPECT_LT(status.error_message().size(), 1024u) << (as_file ? "file" : "trace id");
    EXPECT_THAT(status.error_message(), HasSubstr("aaa")) << "the excerpt is quoted";
  }
}

class GetTraceTest : public GrpcServiceTest {
 protected:
  // Downloads a trace; files by name, in arrival order.
  grpc::Status Download(const v1::GetTraceRequest& request,
                        std::map<std::string, std::string>* files,
                        std::vector<std::string>* order) {
    grpc::ClientContext ctx;
    auto reader = stub_->GetTrace(WithDeadline(&ctx), request);
    v1::TraceChunk chunk;
    while (reader->Read(&chunk)) {
      EXPECT_LE(chunk.data().size(), kTraceChunkBytes);
      std::string& content = (*files)[chunk.file()];
      if (order->empty() || order->back() != chunk.file()) order->push_back(chunk.file());
      EXPECT_EQ(chunk.offset(), content.size()) << chunk.file();
      content += chunk.data();
      EXPECT_LE(content.size(), chunk.file_size());
    }
    return reader->Finish();
  }
  void PutTrace() {
    big_.resize((3 << 20) + 12345);
    for (size_t i = 0; i < big_.size(); ++i) big_[i] = static_cast<char>((i * 7919) >> 3);
    v1::TraceManifest manifest;
    manifest.set_trace_id("t-2");
    manifest.add_results()->set_file("h1-rank0-pid10.json.gz");
    manifest.add_results()->set_pid(11);  // failed process: nothing stored
    manifest.add_results()->set_file("h1-rank1-pid12.json.gz");
    ASSERT_TRUE(store_.PutManifest(manifest).ok());
    ASSERT_TRUE(store_.PutFile("t-2", "h1-rank0-pid10.json.gz", big_).ok());
    ASSERT_TRUE(store_.PutFile("t-2", "h1-rank1-pid12.json.gz", "").ok());
  }
  std::string big_;
};

TEST_F(GetTraceTest, DownloadsTheManifestAndEveryStoredFileByteExact) {
  PutTrace();
  v1::GetTraceRequest request;
  request.set_trace_id("t-2");
  std::map<std::string, std::string> files;
  std::vector<std::string> order;
  grpc::Status status = Download(request, &files, &order);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(order,
              ElementsAre("_gpuctl/mem.json", "h1-rank0-pid10.json.gz", "h1-rank1-pid12.json.gz"));
  EXPECT_TRUE(files["h1-rank0-pid10.json.gz"] == big_);
  EXPECT_EQ(files["h1-rank1-pid12.json.gz"], "");
  EXPECT_NE(files["_gpuctl/mem.json"].find("t-2"), std::string::npos);
}

TEST_F(GetTraceTest, DownloadsOnlyTheNamedFiles) {
  PutTrace();
  v1::GetTraceRequest request;
  request.set_trace_id("t-2");
  request.add_files("h1-rank0-pid10.json.gz");
  std::map<std::string, std::string> files;
  std::vector<std::string> order;
  ASSERT_TRUE(Download(request, &files, &order).ok());
  EXPECT_THAT(order, ElementsAre("h1-rank0-pid10.json.gz"));
  EXPECT_TRUE(files["h1-rank0-pid10.json.gz"] == big_);
}

TEST_F(GetTraceTest, AFileTheTraceDoesNotHaveIsNotFoundListingItsFiles) {
  PutTrace();
  v1::GetTraceRequest request;
  request.set_trace_id("t-2");
  request.add_files("h1-rank0-pid10.json.gz");
  request.add_files("rank7.json");
  std::map<std::string, std::string> files;
  std::vector<std::string> order;
  grpc::Status status = Download(request, &files, &order);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(),
            "trace t-2 has no file \"rank7.json\"; its files: _gpuctl/mem.json, "
            "h1-rank0-pid10.json.gz, h1-rank1-pid12.json.gz");
  // Refused before anything was sent.
  EXPECT_TRUE(order.empty());
}

TEST_F(GetTraceTest, TheFirstChunkSaysTheTraceWasCancelled) {
  v1::TraceManifest manifest;
  manifest.set_trace_id("t-c");
  manifest.set_status(v1::TRACE_STATUS_CANCELLED);
  manifest.mutable_cancellation()->set_reason("the caller cancelled its Trace call");
  manifest.mutable_cancellation()->set_cancelled_by("ipv4:10.0.0.5:51234");
  manifest.add_results()->set_file("h1-rank0-pid10.json.gz");
  ASSERT_TRUE(store_.PutManifest(manifest).ok());
  ASSERT_TRUE(store_.PutFile("t-c", "h1-rank0-pid10.json.gz", "data").ok());
  v1::GetTraceRequest request;
  request.set_trace_id("t-c");
  request.add_files("h1-rank0-pid10.json.gz");
  grpc::ClientContext ctx;
  auto reader = stub_->GetTrace(WithDeadline(&ctx), request);
  std::vector<v1::TraceChunk> chunks;
  v1::TraceChunk chunk;
  while (reader->Read(&chunk)) chunks.push_back(chunk);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].trace_status(), v1::TRACE_STATUS_CANCELLED);
  EXPECT_EQ(chunks[0].cancellation().cancelled_by(), "ipv4:10.0.0.5:51234");
  EXPECT_EQ(chunks[0].cancellation().reason(), "the caller cancelled its Trace call");
}

TEST_F(GetTraceTest, AnUnknownTraceIsNotFoundWithTheTraceIdOnly) {
  v1::GetTraceRequest request;
  request.set_trace_id("t-404");
  request.add_files("manifest.json");
  std::map<std::string, std::string> files;
  std::vector<std::string> order;
  grpc::Status status = Download(request, &files, &order);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "no trace t-404");
}

TEST_F(GetTraceTest, ABucketReadFromADaemonWithoutABucketSaysSo) {
  PutTrace();
  v1::GetTraceRequest request;
  request.set_trace_id("t-2");
  request.set_bucket(true);
  std::map<std::string, std::string> files;
  std::vector<std::string> order;
  grpc::Status status = Download(request, &files, &order);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("no bucket (store.s3)"));
  EXPECT_TRUE(files.empty());
}

TEST_F(GetTraceTest, TheListOfFilesInAMessageIsBounded) {
  v1::TraceManifest manifest;
  manifest.set_trace_id("t-many");
  for (int rank = 0; rank < 500; ++rank) {
    manifest.add_results()->set_file(
        absl::StrCat("node-rank", rank, "-pid", 1000 + rank, ".json.gz"));
  }
  ASSERT_TRUE(store_.PutManifest(manifest).ok());
  v1::GetTraceRequest request;
  request.set_trace_id("t-many");
  request.add_files("nope.json.gz");
  std::map<std::string, std::string> files;
  std::vector<std::string> order;
  grpc::Status status = Download(request, &files, &order);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LT(status.error_message().size(), 1024u);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr(" more"));
}

TEST_F(GetTraceTest, RejectsBadRequestsWithTheRightCode) {
  PutTrace();
  struct Case {
    std::string trace_id;
    std::vector<std::string> files;
    grpc::StatusCode code;
  };
  const Case cases[] = {
      {"", {}, grpc::StatusCode::INVALID_ARGUMENT},
      {"t-2", {"../../etc/passwd"}, grpc::StatusCode::INVALID_ARGUMENT},
      {"t-2", {".."}, grpc::StatusCode::INVALID_ARGUMENT},
      {"t-2", {"missing.json.gz"}, grpc::StatusCode::NOT_FOUND},
      {"t-404", {}, grpc::StatusCode::NOT_FOUND},
  };
  for (const Case& c : cases) {
    v1::GetTraceRequest request;
    request.set_trace_id(c.trace_id);
    for (const std::string& f : c.files) request.add_files(f);
    std::map<std::string, std::string> files;
    std::vector<std::string> order;
    EXPECT_EQ(Download(request, &files, &order).error_code(), c.code)
        << c.trace_id << " " << (c.files.empty() ? "" : c.files[0]);
  }
}

}  // namespace
}  // namespace gpuctl::daemon
