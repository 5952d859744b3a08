// Who may reach the IPC socket (mode, group) and what a refused Hello hears.
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/testing/ipc_test_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::daemon::testing::IpcTestClient;
using ::testing::_;

// The errno of connect() to `path` from a child running as uid/gid
// `id` (0 when it connects); -1 when the child could not switch.
int ConnectErrnoAs(const std::string& path, uid_t id, gid_t gid) {
  pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(id) != 0) _exit(255);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    _exit(rc == 0 ? 0 : (errno & 0x7f));
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status) == 255 ? -1 : WEXITSTATUS(status);
}

constexpr uid_t kNobody = 65534;

class IpcAccessTest : public testing::IpcServerFixture {
 protected:
  void SetUp() override {
    IpcServerFixture::SetUp();
    // Only the socket's own mode may keep others out (mkdtemp made 0700).
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  }
};

TEST_F(IpcAccessTest, SocketIsGroupOnlyByDefault) {
  StartServer(IpcServerOptions{});
  struct stat st {};
  ASSERT_EQ(stat(socket_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  // Another user outside the socket's group cannot connect at all.
  EXPECT_EQ(ConnectErrnoAs(socket_path_, kNobody, kNobody), EACCES);
  // The daemon's own user can.
  auto client = IpcTestClient::Connect(socket_path_);
  EXPECT_TRUE(client.ok()) << client.status();
}

TEST_F(IpcAccessTest, MembersOfTheSocketGroupMayConnect) {
  if (geteuid() != 0) GTEST_SKIP() << "giving the socket another group needs root";
  IpcServerOptions options;
  options.access.group = kNobody;
  StartServer(options);
  struct stat st {};
  ASSERT_EQ(stat(socket_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, kNobody);
  EXPECT_EQ(ConnectErrnoAs(socket_path_, kNobody, kNobody), 0);
  EXPECT_EQ(ConnectErrnoAs(socket_path_, 4242, 4242), EACCES);  // neither owner nor group
}

TEST_F(IpcAccessTest, RefusalsCarryTheirReason) {
  StartServer(IpcServerOptions{});
  struct Case {
    absl::Status status;
    v1::ipc::RejectReason reason;
  };
  const Case kCases[] = {
      {absl::PermissionDeniedError("uid 1000 may not attach (not in ipc.allowed_uids)"),
       v1::ipc::REJECT_REASON_PERMISSION_DENIED},
      {absl::FailedPreconditionError("client speaks IPC protocol 2.0, daemon speaks 1.2"),
       v1::ipc::REJECT_REASON_PROTOCOL_VERSION},
      {absl::InvalidArgumentError("Hello rank -2 is below -1"),
       v1::ipc::REJECT_REASON_INVALID_HELLO},
      {absl::AlreadyExistsError("peer 1 already sent Hello"), v1::ipc::REJECT_REASON_UNSPECIFIED},
  };
  for (const Case& c : kCases) {
    auto client = IpcTestClient::Connect(socket_path_);
    ASSERT_TRUE(client.ok()) << client.status();
    // A fresh Status made on the loop thread, not a copy sharing c.status's
    // reference-counted message: absl counts references inside its
    // uninstrumented library, so ThreadSanitizer would take the loop's last
    // read of the message and this thread's later free for a race.
    EXPECT_CALL(core_, OnPeerHello(_, _, _, _))
        .WillOnce([code = c.status.code(), message = std::string(c.status.message())] {
          return absl::Status(code, message);
        })
        .RetiresOnSaturation();
    ASSERT_TRUE(client->SendHello().ok());
    auto reply = client->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_TRUE(reply->has_hello_rejected()) << reply->DebugString();
    EXPECT_EQ(reply->hello_rejected().reason(), c.reason) << c.status;
    EXPECT_EQ(reply->hello_rejected().message(), c.status.message());
    EXPECT_EQ(reply->hello_rejected().protocol_major(), kIpcProtocolMajor);
    EXPECT_EQ(reply->hello_rejected().protocol_minor(), kIpcProtocolMinor);
    EXPECT_TRUE(client->WaitForClose());
  }
}

}  // namespace
}  // namespace gpuctl::daemon
