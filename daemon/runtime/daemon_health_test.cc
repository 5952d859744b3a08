// grpc.health.v1 and server reflection on a running daemon, through a real
// gRPC channel. The daemon's gRPC library serves both from its own
// generated code, so the test speaks them with a generic stub: requests are
// written by hand and responses read as protobuf unknown fields.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/rpc/testing/raw_call.h"
#include "daemon/runtime/daemon_main.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kHealthWatch[] = "/grpc.health.v1.Health/Watch";
constexpr char kReflection[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
// grpc.health.v1.HealthCheckResponse.ServingStatus
constexpr uint64_t kServing = 1;
constexpr uint64_t kNotServing = 2;

// One call through the generic stub, driven step by step; every step waits
// for its completion with a deadline.
class GenericCall {
 public:
  GenericCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method)
      : stub_(channel) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    call_ = stub_.PrepareCall(&ctx_, method, &cq_);
    started_ = Await([&](void* tag) { call_->StartCall(tag); });
  }
  ~GenericCall() {
    ctx_.TryCancel();
    if (started_ && !finished_) Finish();
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  bool started() const { return started_; }
  // Sends one request and closes the sending side.
  bool Send(const std::string& request) {
    grpc::Slice slice(request);
    grpc::ByteBuffer buffer(&slice, 1);
    return Await([&](void* tag) { call_->Write(buffer, tag); }) &&
           Await([&](void* tag) { call_->WritesDone(tag); });
  }
  // The next response message; false at the end of the stream.
  bool Read(UnknownFieldSet* fields) {
    grpc::ByteBuffer buffer;
    if (!Await([&](void* tag) { call_->Read(&buffer, tag); })) return false;
    std::vector<grpc::Slice> slices;
    if (!buffer.Dump(&slices).ok()) return false;
    std::string bytes;
    for (const grpc::Slice& s : slices) bytes.append(s.begin(), s.end());
    fields->Clear();
    return fields->ParseFromString(bytes);
  }
  void Cancel() { ctx_.TryCancel(); }
  grpc::Status Finish() {
    finished_ = true;
    grpc::Status status;
    Await([&](void* tag) { call_->Finish(&status, tag); });
    return status;
  }

 private:
  template <typename Op>
  bool Await(Op op) {
    int marker = 0;  // steps run one at a time
    void* want = &marker;
    op(want);
    void* tag = nullptr;
    bool ok = false;
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(30);
    if (cq_.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) return false;
    EXPECT_EQ(tag, want);
    return ok;
  }

  grpc::GenericStub stub_;
  grpc::ClientContext ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false;
  bool finished_ = false;
};

// A HealthCheckRequest naming `service` ("" is the whole server).
std::string HealthRequest(const std::string& service) {
  if (service.empty()) return "";
  return std::string(1, '\x0a') + static_cast<char>(service.size()) + service;
}

// HealthCheckResponse.status; 0 when absent.
uint64_t ServingStatus(const UnknownFieldSet& response) {
  for (int i = 0; i < response.field_count(); ++i) {
    if (response.field(i).number() == 1 && response.field(i).type() == UnknownField::TYPE_VARINT) {
      return response.field(i).varint();
    }
  }
  return 0;
}

class DaemonHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuctld-health-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    DaemonOptions options;
    options.listen_address = "127.0.0.1:0";
    options.socket_path = dir_ + "/run/gpuctl.sock";
    options.store_dir = dir_ + "/traces";
    auto daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    channel_ = grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (daemon_ != nullptr) daemon_->Shutdown();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Health/Check of `service`: the serving status, or 0 with `status` set.
  uint64_t Check(const std::string& service, grpc::Status* status = nullptr) {
    GenericCall call(channel_, kHealthCheck);
    EXPECT_TRUE(call.started());
    EXPECT_TRUE(call.Send(HealthRequest(service)));
    UnknownFieldSet response;
    const bool got = call.Read(&response);
    grpc::Status finished = call.Finish();
    if (status != nullptr) *status = finished;
    return got && finished.ok() ? ServingStatus(response) : 0;
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(DaemonHealthTest, ServingOnceUpForTheServerAndTheGpuctlService) {
  EXPECT_EQ(Check(""), kServing);
  EXPECT_EQ(Check("gpuctl.v1.Gpuctl"), kServing);
  grpc::Status status;
  EXPECT_EQ(Check("no.such.Service", &status), 0u);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonHealthTest, WatchersHearNotServingWhenTheDaemonStops) {
  GenericCall watch(channel_, kHealthWatch);
  ASSERT_TRUE(watch.started());
  ASSERT_TRUE(watch.Send(HealthRequest("gpuctl.v1.Gpuctl")));
  UnknownFieldSet update;
  ASSERT_TRUE(watch.Read(&update));
  EXPECT_EQ(ServingStatus(update), kServing);
  std::thread stopping([this] { daemon_->Shutdown(); });
  const bool got = watch.Read(&update);
  // The stream stays open after the update: end it so the stop need not
  // wait out its grace period.
  watch.Cancel();
  stopping.join();
  ASSERT_TRUE(got) << "the watch ended without a NOT_SERVING update";
  EXPECT_EQ(ServingStatus(update), kNotServing);
}

TEST_F(DaemonHealthTest, ReflectionListsTheServices) {
  GenericCall call(channel_, kReflection);
  ASSERT_TRUE(call.started());
  // ServerReflectionRequest{list_services: ""} (field 7).
  ASSERT_TRUE(call.Send(std::string("\x3a\x00", 2)));
  UnknownFieldSet response;
  ASSERT_TRUE(call.Read(&response));
  std::set<std::string> services;
  for (int i = 0; i < response.field_count(); ++i) {
    // ServerReflectionResponse.list_services_response (6), its repeated
    // ServiceResponse service (1), each with name (1).
    if (response.field(i).number() != 6) continue;
    UnknownFieldSet list;
    ASSERT_TRUE(list.ParseFromString(response.field(i).length_delimited()));
    for (int j = 0; j < list.field_count(); ++j) {
      UnknownFieldSet service;
      ASSERT_TRUE(service.ParseFromString(list.field(j).length_delimited()));
      for (int k = 0; k < service.field_count(); ++k) {
        if (service.field(k).number() == 1) services.insert(service.field(k).length_delimited());
      }
    }
  }
  EXPECT_TRUE(services.count("gpuctl.v1.Gpuctl")) << services.size() << " services";
  EXPECT_TRUE(services.count("grpc.health.v1.Health"));
  EXPECT_TRUE(services.count("grpc.reflection.v1alpha.ServerReflection"));
  EXPECT_TRUE(services.count("grpc.reflection.v1.ServerReflection"));
  EXPECT_TRUE(call.Finish().ok());
}

TEST_F(DaemonHealthTest, ReflectionV1ListsTheServicesAndDescribesGpuctl) {
  namespace reflection = grpc::reflection::v1;
  auto stub = reflection::ServerReflection::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub->ServerReflectionInfo(&context);
  reflection::ServerReflectionRequest request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  reflection::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::set<std::string> services;
  for (const auto& service : response.list_services_response().service()) {
    services.insert(service.name());
  }
  EXPECT_TRUE(services.count("gpuctl.v1.Gpuctl")) << services.size() << " services";
  EXPECT_TRUE(services.count("grpc.health.v1.Health"));
  EXPECT_TRUE(services.count("grpc.reflection.v1.ServerReflection"));

  // The file declaring a method, with the files it imports.
  request.set_file_containing_symbol("gpuctl.v1.Gpuctl.GetTrace");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  std::set<std::string> files;
  for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    files.insert(file.name());
  }
  EXPECT_TRUE(files.count("gpuctl/v1/service.proto")) << files.size() << " files";
  EXPECT_TRUE(files.count("google/protobuf/duration.proto"));

  request.set_file_containing_symbol("no.such.Symbol");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());
}

// Through the daemon's own store and core: bytes that are not a request,
// and a 10 KiB trace id, each get INVALID_ARGUMENT with a short message.
TEST_F(DaemonHealthTest, BadRequestsGetInvalidArgumentWithBoundedMessages) {
  grpc::Status garbage =
      testing::RawCall(channel_, "/gpuctl.v1.Gpuctl/GetTrace", std::string(11, '\xff'));
  EXPECT_EQ(garbage.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << garbage.error_message();
  EXPECT_THAT(garbage.error_message(),
              ::testing::HasSubstr("GetTrace request: not a valid gpuctl.v1.GetTraceRequest"));

  const std::string huge_id(10 << 10, '0');
  auto stub = v1::Gpuctl::NewStub(channel_);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetTraceRequest request;
    request.set_trace_id(huge_id);
    auto reader = stub->GetTrace(&context, request);
    v1::TraceChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_LT(status.error_message().size(), 1024u);
    EXPECT_THAT(status.error_message(), ::testing::HasSubstr("invalid trace id \"000"));
  }
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::TraceRequest request;
    request.set_trace_id(huge_id);
    request.mutable_duration()->set_seconds(1);
    request.mutable_selector()->set_job_id("j");
    auto reader = stub->Trace(&context, request);
    v1::TraceEvent event;
    while (reader->Read(&event)) {
    }
    grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_LT(status.error_message().size(), 1024u);
    EXPECT_THAT(status.error_message(), ::testing::HasSubstr("invalid trace id \"000"));
  }
}

}  // namespace
}  // namespace gpuctl::daemon
