#include "daemon/rpc/call_counter.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/rpc/reflection_v1_service.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Pair;

class CallCounterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(MakeCallCounter([this](absl::string_view method, absl::StatusCode code) {
      absl::MutexLock lock(&mu_);
      calls_.emplace_back(std::string(method), code);
    }));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    // A callback service, as gpuctld's are, beside the default health
    // service.
    builder.RegisterService(&reflection_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override { server_->Shutdown(); }

  // One unary call with an empty request; its status.
  grpc::Status Call(const std::string& method) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    // An empty message: zero bytes, which every request type parses.
    grpc::Slice empty(std::string(""));
    grpc::ByteBuffer request(&empty, 1), response;
    absl::Notification done;
    grpc::Status status;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
    done.WaitForNotification();
    return status;
  }
  std::vector<std::pair<std::string, absl::StatusCode>> Calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

  ReflectionV1Service reflection_{{"grpc.health.v1.Health"}};
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  absl::Mutex mu_;
  std::vector<std::pair<std::string, absl::StatusCode>> calls_ ABSL_GUARDED_BY(mu_);
};

TEST_F(CallCounterTest, EachAnsweredCallIsReportedWithItsMethodAndCode) {
  ASSERT_TRUE(Call("/grpc.health.v1.Health/Check").ok());
  EXPECT_THAT(Calls(), Contains(Pair("/grpc.health.v1.Health/Check", absl::StatusCode::kOk)));
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(CallCounterTest, AMethodNoServiceServesIsReportedAsTheClientNamedIt) {
  EXPECT_EQ(Call("/no.Such/Method").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  // Whatever a client sends: DaemonMetrics keeps such names out of its
  // labels (ServedMethods is its list of the served ones).
  EXPECT_THAT(Calls(), ElementsAre(Pair("/no.Such/Method", absl::StatusCode::kUnimplemented)));
}

TEST(ServedMethodsTest, ListsTheMethodsOfTheServicesInTheDescriptorPool) {
  std::vector<std::string> methods = ServedMethods({"gpuctl.v1.Gpuctl", "no.such.Service"});
  EXPECT_THAT(methods, Contains("/gpuctl.v1.Gpuctl/Trace"));
  EXPECT_THAT(methods, Contains("/gpuctl.v1.Gpuctl/ListProcesses"));
  for (const std::string& method : methods) {
    EXPECT_EQ(method.rfind("/gpuctl.v1.Gpuctl/", 0), 0u) << method;
  }
}

}  // namespace
}  // namespace gpuctl::daemon
