#ifndef GPUCTL_DAEMON_IPC_TESTING_IPC_TEST_CLIENT_H_
#define GPUCTL_DAEMON_IPC_TESTING_IPC_TEST_CLIENT_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/event_loop.h"
#include "daemon/core/testing/mock_daemon_core.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/unix_socket.h"
#include "gpuctl/v1/ipc.pb.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::testing {

inline constexpr absl::Duration kTestDeadline = absl::Seconds(30);

// A raw libgpuctl-side connection, for driving the IPC server in tests.
class IpcTestClient {
 public:
  static absl::StatusOr<IpcTestClient> Connect(const std::string& path);

  absl::Status SendRaw(const std::string& bytes, std::vector<int> fds = {});
  absl::Status Send(const v1::ipc::ClientMessage& message, std::vector<int> fds = {});
  absl::Status SendHello();
  // Waits for the next message; an error on EOF, timeout or garbage.
  absl::StatusOr<v1::ipc::DaemonMessage> Receive(absl::Duration timeout = kTestDeadline);
  // Reads (and discards) messages until the server closes the connection.
  bool WaitForClose(absl::Duration timeout = kTestDeadline);
  void Close() { fd_.Reset(); }
  int fd() const { return fd_.get(); }

 private:
  explicit IpcTestClient(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// A sealed (shrink, grow, write) memfd holding `bytes`; -1 on failure.
int MakeMemfd(const std::string& bytes, bool seal = true);

// An IpcServer on a loop thread, listening in a fresh temp dir, with a
// strict mock core.
class IpcServerFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  void StartServer(IpcServerOptions options);
  // Runs `fn` on the loop thread and waits for it.
  void RunOnLoop(absl::AnyInvocable<void() &&> fn);
  // A connected client whose Hello the core accepted; returns its peer id.
  PeerId ConnectAndHello(IpcTestClient* client);

  std::string dir_;
  std::string socket_path_;
  ::testing::StrictMock<MockDaemonCore> core_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<IpcServer> server_;
  std::thread thread_;
};

}  // namespace gpuctl::daemon::testing

#endif  // GPUCTL_DAEMON_IPC_TESTING_IPC_TEST_CLIENT_H_
