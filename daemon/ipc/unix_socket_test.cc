#include "daemon/ipc/unix_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuctl-sock-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(UnixSocketTest, CreatesParentDirectoriesAndAGroupOnlySocketByDefault) {
  std::string path = dir_ + "/a/b/gpuctl.sock";
  auto fd = ListenSeqpacket(path, 8);
  ASSERT_TRUE(fd.ok()) << fd.status();
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

TEST_F(UnixSocketTest, AppliesTheConfiguredModeAndGroup) {
  std::string path = dir_ + "/run/gpuctl.sock";
  SocketAccess access{.mode = 0600, .group = getegid()};
  auto fd = ListenSeqpacket(path, 8, access);
  ASSERT_TRUE(fd.ok()) << fd.status();
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);  // a group is set: no access for others
  EXPECT_EQ(st.st_gid, getegid());
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_gid, getegid());
}

TEST_F(UnixSocketTest, RefusesAWorldWritableDirectoryWithoutTheStickyBit) {
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  auto fd = ListenSeqpacket(dir_ + "/gpuctl.sock", 8);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(fd.status().message().find("anyone may write"), std::string::npos) << fd.status();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/gpuctl.sock"));
  // With the sticky bit (like /tmp) only the owner may remove the socket.
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);
  EXPECT_TRUE(ListenSeqpacket(dir_ + "/gpuctl.sock", 8).ok());
}

TEST_F(UnixSocketTest, RefusesWhenAnotherListenerIsAlive) {
  std::string path = dir_ + "/gpuctl.sock";
  auto first = ListenSeqpacket(path, 8);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ListenSeqpacket(path, 8);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("already listening"), std::string::npos);
}

TEST_F(UnixSocketTest, ReplacesAStaleSocketFile) {
  std::string path = dir_ + "/gpuctl.sock";
  {
    auto first = ListenSeqpacket(path, 8);
    ASSERT_TRUE(first.ok());
  }  // closed without unlinking: what a crashed daemon leaves behind
  ASSERT_TRUE(std::filesystem::exists(path));
  auto second = ListenSeqpacket(path, 8);
  EXPECT_TRUE(second.ok()) << second.status();
}

TEST_F(UnixSocketTest, RefusesToReplaceSomethingThatIsNotASocket) {
  std::string path = dir_ + "/gpuctl.sock";
  std::ofstream(path) << "precious";
  auto fd = ListenSeqpacket(path, 8);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
}

TEST_F(UnixSocketTest, RejectsOverlongPaths) {
  auto fd = ListenSeqpacket(dir_ + "/" + std::string(200, 'x'), 8);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(UnixSocketTest, ReceiveReportsTruncationAndKeepsDescriptors) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]);
  UniqueFd b(sv[1]);
  ASSERT_EQ(send(b.get(), "0123456789", 10, 0), 10);
  uint8_t buf[4];
  Datagram d;
  ASSERT_EQ(ReceiveDatagram(a.get(), absl::MakeSpan(buf), &d), RecvResult::kDatagram);
  EXPECT_TRUE(d.truncated);
  EXPECT_EQ(ReceiveDatagram(a.get(), absl::MakeSpan(buf), &d), RecvResult::kWouldBlock);
  b.Reset();
  EXPECT_EQ(ReceiveDatagram(a.get(), absl::MakeSpan(buf), &d), RecvResult::kEof);
}

}  // namespace
}  // namespace gpuctl::daemon
