// TLS credentials and bearer-token checks of the gRPC adapter.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "daemon/common/event_loop.h"
#include "daemon/rpc/bearer_token.h"
#include "daemon/rpc/grpc_service.h"
#include "daemon/rpc/testing/in_memory_trace_store.h"
#include "daemon/rpc/transport_security.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-rpcsec-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name, const std::string& content, int mode) const {
    std::string path = (fs::path(path_) / name).string();
    std::ofstream(path) << content;
    chmod(path.c_str(), mode);
    return path;
  }
  std::string Path(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

TEST(TokensEqualTest, EqualOnlyForIdenticalTokens) {
  EXPECT_TRUE(TokensEqual("s3cret-token", "s3cret-token"));
  EXPECT_FALSE(TokensEqual("s3cret-token", "s3cret-tokeN"));
  EXPECT_FALSE(TokensEqual("s3cret-token", "s3cret-token-longer"));
  EXPECT_FALSE(TokensEqual("s3cret-token", ""));
  EXPECT_FALSE(TokensEqual("", "x"));
}

TEST(ReadTokenFileTest, ReadsTokenWithoutTrailingNewline) {
  TempDir dir;
  absl::StatusOr<std::string> token = ReadTokenFile(dir.File("t", "abc-123\n", 0600));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "abc-123");
}

TEST(ReadTokenFileTest, RefusesGroupOrWorldReadableFile) {
  TempDir dir;
  for (int mode : {0640, 0604, 0660}) {
    absl::StatusOr<std::string> token = ReadTokenFile(dir.File("t", "abc", mode));
    ASSERT_FALSE(token.ok()) << mode;
    EXPECT_THAT(token.status().message(), HasSubstr("chmod 600"));
    EXPECT_THAT(token.status().message(), Not(HasSubstr("abc")));
  }
}

TEST(ReadTokenFileTest, RefusesMissingEmptyAndBadTokens) {
  TempDir dir;
  EXPECT_THAT(ReadTokenFile(dir.Path("absent")).status().message(),
              HasSubstr("No such file or directory"));
  EXPECT_THAT(ReadTokenFile(dir.File("e", " \n", 0600)).status().message(), HasSubstr("empty"));
  EXPECT_THAT(ReadTokenFile(dir.File("s", "two words\n", 0600)).status().message(),
              HasSubstr("printable ASCII"));
  EXPECT_THAT(ReadTokenFile(dir.File("l", std::string(5000, 'a'), 0600)).status().message(),
              HasSubstr("larger than"));
}

// Makes a CA, and a server certificate and key it signed, with openssl.
class TlsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(Openssl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
                      "-subj /CN=ca -keyout ca.key "
                      "-out ca.pem"),
              0);
    ASSERT_EQ(Openssl("req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "
                      "/CN=localhost -keyout server.key "
                      "-out server.csr"),
              0);
    ASSERT_EQ(Openssl("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
                      "-out server.pem"),
              0);
  }
  int Openssl(const std::string& args) {
    return std::system(
        ("cd " + dir_.Path("") + " && openssl " + args + " >/dev/null 2>&1").c_str());
  }
  TempDir dir_;
};

TEST_F(TlsFilesTest, AcceptsMatchingCertAndKeyWithClientCa) {
  ServerTlsFiles files{dir_.Path("server.pem"), dir_.Path("server.key"), dir_.Path("ca.pem")};
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = MakeServerCredentials(files);
  ASSERT_TRUE(creds.ok()) << creds.status();
  EXPECT_NE(*creds, nullptr);
}

TEST_F(TlsFilesTest, RefusesKeyOfAnotherCertificate) {
  ServerTlsFiles files{dir_.Path("server.pem"), dir_.Path("ca.key"), ""};
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = MakeServerCredentials(files);
  ASSERT_FALSE(creds.ok());
  EXPECT_THAT(creds.status().message(), HasSubstr("is not the private key of the certificate"));
}

TEST_F(TlsFilesTest, RefusesMissingAndNonPemFiles) {
  ServerTlsFiles missing{dir_.Path("nope.pem"), dir_.Path("server.key"), ""};
  EXPECT_THAT(MakeServerCredentials(missing).status().message(),
              HasSubstr("cannot read --tls-cert"));
  ServerTlsFiles not_pem{dir_.File("junk.pem", "hello\n", 0644), dir_.Path("server.key"), ""};
  EXPECT_THAT(MakeServerCredentials(not_pem).status().message(),
              HasSubstr("holds no PEM certificate"));
  ServerTlsFiles bad_key{dir_.Path("server.pem"), dir_.Path("junk.pem"), ""};
  EXPECT_THAT(MakeServerCredentials(bad_key).status().message(),
              HasSubstr("no unencrypted PEM private key"));
  ServerTlsFiles bad_ca{dir_.Path("server.pem"), dir_.Path("server.key"), dir_.Path("junk.pem")};
  EXPECT_THAT(MakeServerCredentials(bad_ca).status().message(), HasSubstr("--tls-client-ca"));
}

// The service behind a real in-process server, requiring a token.
class TokenAuthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    loop_thread_ = std::thread([this] { loop_->Run(); });
    service_ = std::make_unique<GrpcService>(nullptr, loop_.get(), &store_, nullptr);
    service_->set_auth(&auth_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Gpuctl::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
    server_.reset();
    loop_->Quit();
    loop_thread_.join();
  }
  grpc::Status ListWith(const char* authorization) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (authorization != nullptr) context.AddMetadata("authorization", authorization);
    v1::ListTracesResponse response;
    return stub_->ListTraces(&context, {}, &response);
  }

  BearerTokenAuth auth_{"right-token"};
  daemon::testing::InMemoryTraceStore store_;
  std::unique_ptr<EventLoop> loop_;
  std::thread loop_thread_;
  std::unique_ptr<GrpcService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Gpuctl::Stub> stub_;
};

TEST_F(TokenAuthServiceTest, UnaryCallNeedsTheRightToken) {
  EXPECT_TRUE(ListWith("Bearer right-token").ok());
  grpc::Status missing = ListWith(nullptr);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status wrong = ListWith("Bearer wrong-token");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), Not(HasSubstr("wrong-token")));
  EXPECT_EQ(ListWith("right-token").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// Like GetStatus, ProbeClock reads nothing of the traces, but answers only
// a caller with the token.
TEST_F(TokenAuthServiceTest, ProbeClockNeedsTheRightToken) {
  for (const char* authorization : {"Bearer right-token", "Bearer wrong-token", ""}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (*authorization != '\0') context.AddMetadata("authorization", authorization);
    v1::ProbeClockResponse response;
    const grpc::Status status = stub_->ProbeClock(&context, {}, &response);
    if (std::string(authorization) == "Bearer right-token") {
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_TRUE(response.has_daemon_time());
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << authorization;
      EXPECT_FALSE(response.has_daemon_time());
    }
  }
}

TEST_F(TokenAuthServiceTest, StreamingCallsAreRefusedWithoutToken) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetTraceRequest request;
  request.set_trace_id("t-1");
  auto reader = stub_->GetTrace(&context, request);
  v1::TraceChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  grpc::ClientContext trace_context;
  trace_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto trace = stub_->Trace(&trace_context, {});
  v1::TraceEvent event;
  EXPECT_FALSE(trace->Read(&event));
  EXPECT_EQ(trace->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace gpuctl::daemon
