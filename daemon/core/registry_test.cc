#include "daemon/core/registry.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::HasSubstr;

v1::ipc::Hello MakeHello(int pid, const std::string& job) {
  v1::ipc::Hello h;
  h.set_protocol_major(1);
  h.set_pid(pid);
  h.set_job_id(job);
  h.set_rank(0);
  h.set_local_rank(0);
  h.set_world_size(2);
  h.set_hostname("node1");
  h.set_library_version("0.1.0");
  h.add_cmdline("python");
  return h;
}

PeerCredentials Creds(int pid) { return {pid, 1000, 1000}; }

TEST(RegistryTest, AddFillsInfoFromHelloAndCredentials) {
  Registry r;
  absl::Time now = absl::FromUnixSeconds(1704067200);
  ASSERT_TRUE(r.Add(1, Creds(10), MakeHello(10, "42"), now).ok());
  AttachedProcess* p = r.Find(1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->info.pid(), 10);
  EXPECT_EQ(p->info.uid(), 1000u);
  EXPECT_EQ(p->info.job_id(), "42");
  EXPECT_EQ(p->info.hostname(), "node1");
  EXPECT_EQ(p->info.cmdline(0), "python");
  EXPECT_EQ(p->info.attached_at().seconds(), 1704067200);
  EXPECT_EQ(p->info.capture_state(), v1::CAPTURE_STATE_IDLE);
  EXPECT_EQ(r.Add(1, Creds(10), MakeHello(10, "42"), now).code(), absl::StatusCode::kAlreadyExists);
  r.Remove(1);
  EXPECT_EQ(r.Find(1), nullptr);
}

TEST(RegistryTest, RefusesPidMismatchAndOtherProtocol) {
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
  EXPECT_THAT(st.message(), HasSubstr("1.0"));
}

// A process in a container claims its pid in its own namespace; the daemon
// sees another pid and checks the claim against NSpid in its /proc.
TEST(RegistryTest, AcceptsContainerPidOnlyWhenNsPidConfirmsIt) {
  std::string proc = absl::StrCat(::testing::TempDir(), "/registry_proc_", getpid());
  std::filesystem::create_directories(proc + "/4711");
  std::ofstream(proc + "/4711/status") << "Name:\tpython\nNSpid:\t4711\t12\nPPid:\t1\n";
  EXPECT_TRUE(ValidateHello(Creds(4711), MakeHello(12, "42"), proc).ok());
  EXPECT_EQ(ValidateHello(Creds(4711), MakeHello(13, "42"), proc).code(),
            absl::StatusCode::kPermissionDenied);
  // No status file: only the exact pid is accepted.
  EXPECT_EQ(ValidateHello(Creds(4712), MakeHello(12, "42"), proc).code(),
            absl::StatusCode::kPermissionDenied);

  Registry r(proc);
  ASSERT_TRUE(r.Add(1, Creds(4711), MakeHello(12, "42"), absl::UnixEpoch()).ok());
  EXPECT_EQ(r.Find(1)->info.pid(), 4711) << "the registry keeps the daemon's view of the pid";
  std::filesystem::remove_all(proc);
}

TEST(RegistryTest, RefusesOversizedFields) {
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

TEST(RegistryTest, SelectsByJobAndPids) {
  Registry r;
  absl::Time now = absl::UnixEpoch();
  ASSERT_TRUE(r.Add(1, Creds(10), MakeHello(10, "7"), now).ok());
  ASSERT_TRUE(r.Add(2, Creds(11), MakeHello(11, "7"), now).ok());
  ASSERT_TRUE(r.Add(3, Creds(12), MakeHello(12, ""), now).ok());
  v1::ProcessSelector s;
  EXPECT_EQ(r.Select(s).size(), 3u);
  s.set_job_id("7");
  EXPECT_EQ(r.Select(s).size(), 2u);
  s.add_pids(11);
  s.add_pids(12);
  auto both = r.Select(s);
  ASSERT_EQ(both.size(), 1u);
  EXPECT_EQ(both[0]->info.pid(), 11);
  s.clear_job_id();
  EXPECT_EQ(r.Select(s).size(), 2u);
  EXPECT_EQ(r.DescribeAttached(), "3 attached: job \"7\" x2, job \"\" x1");
  EXPECT_EQ(Registry().DescribeAttached(), "0 attached");
  s.set_job_id("42");
  EXPECT_EQ(DescribeSelector(s), "job \"42\" and pids [11, 12]");
}

}  // namespace
}  // namespace gpuctl::daemon
