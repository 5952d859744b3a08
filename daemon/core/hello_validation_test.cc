#include "daemon/core/hello_validation.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/core/testing/fake_proc.h"
#include "daemon/core/testing/test_hello.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

using ::gpuctl::testing::Creds;
using ::gpuctl::testing::FakeProcReader;
using ::gpuctl::testing::MakeHello;

TEST(HelloValidationTest, RefusesPidMismatchAndOtherProtocol) {
  absl::Status st = ValidateHello(Creds(11), MakeHello(10, "42"));
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(st.message(), HasSubstr("claims pid 10"));
  EXPECT_THAT(st.message(), HasSubstr("pid 11"));
  auto h = MakeHello(10, "42");
  h.set_protocol_major(2);
  h.set_protocol_minor(3);
  st = ValidateHello(Creds(10), h);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("2.3"));
  EXPECT_THAT(st.message(),
              HasSubstr(absl::StrCat("daemon speaks ", kIpcProtocolMajor, ".", kIpcProtocolMinor)));
}

TEST(HelloValidationTest, RefusesOversizedFields) {
  auto check = [](v1::ipc::Hello h, absl::string_view what) {
    absl::Status st = ValidateHello(Creds(10), h);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(st.message(), HasSubstr(what));
  };
  auto h = MakeHello(10, std::string(257, 'j'));
  check(h, "job_id");
  EXPECT_TRUE(ValidateHello(Creds(10), MakeHello(10, std::string(256, 'j'))).ok());
  h = MakeHello(10, "1");
  h.set_hostname(std::string(256, 'h'));
  check(h, "hostname");
  h = MakeHello(10, "1");
  h.set_library_version(std::string(65, 'v'));
  check(h, "library_version");
  h = MakeHello(10, "1");
  for (int i = 0; i < 257; ++i) h.add_cmdline("a");
  check(h, "arguments");
  h = MakeHello(10, "1");
  h.add_cmdline(std::string(64 * 1024, 'x'));
  check(h, "cmdline is");
  h = MakeHello(10, "1");
  h.set_rank(-2);
  check(h, "rank");
  h = MakeHello(10, "1");
  h.set_rank(2);
  check(h, "world_size");
}

TEST(HelloValidationTest, AsksTheProcReaderAboutAClaimedContainerPid) {
  FakeProcReader proc;
  proc.SetInnermostPid(4711, 12);
  EXPECT_TRUE(ValidateHello(Creds(4711), MakeHello(12, "42"), proc).ok());
  EXPECT_TRUE(ValidateHello(Creds(4711), MakeHello(4711, "42"), proc).ok());
  EXPECT_EQ(ValidateHello(Creds(4711), MakeHello(13, "42"), proc).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ValidateHello(Creds(4712), MakeHello(12, "42"), proc).code(),
            absl::StatusCode::kPermissionDenied)
      << "nothing known of the peer: only its own pid";
}

}  // namespace
}  // namespace gpuctl::daemon
