#ifndef GPUCTL_DAEMON_KINETO_KINETO_SERVER_H_
#define GPUCTL_DAEMON_KINETO_KINETO_SERVER_H_

#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/common/event_loop.h"
#include "daemon/common/posix_file.h"
#include "daemon/core/peer_channel.h"
#include "daemon/kineto/kineto_protocol.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon::kineto {

// kineto.mode.
enum class KinetoMode { kAuto, kOn, kOff };
absl::StatusOr<KinetoMode> ParseKinetoMode(absl::string_view text);
std::string KinetoModeName(KinetoMode mode);

// The daemon's endpoint name, as libkineto addresses it: the abstract
// "\0dynolog\0" (trailing NUL included), or <KINETO_IPC_SOCKET_DIR>/dynolog.
inline constexpr char kDaemonEndpoint[] = "dynolog";

struct KinetoServerOptions {
  KinetoMode mode = KinetoMode::kAuto;
  // Holds the path socket `<socket_dir>/dynolog`; empty: none. Created
  // (sticky, writable by all, like /tmp: every pod creates its own socket
  // there) when missing. Short: libkineto does not check the length.
  std::string socket_dir;
  // The abstract name without its NULs; tests use names of their own.
  std::string abstract_name = kDaemonEndpoint;
  // Datagrams read per wake-up of a socket before the loop runs others.
  int max_datagrams_per_wakeup = 256;
};

// Which socket a datagram came in on; the reply leaves by the same one.
enum class KinetoSocket { kAbstract, kPath };

// Receives the validated datagrams. Called on the loop thread.
class KinetoDatagramHandler {
 public:
  virtual ~KinetoDatagramHandler() = default;
  // `creds` is the kernel's (SCM_CREDENTIALS, in the daemon's pid
  // namespace). Returns the reply to send back, or nullopt for none.
  virtual std::optional<std::string> OnDatagram(const PeerCredentials& creds,
                                                const KinetoMessage& message,
                                                KinetoSocket socket) = 0;
};

// libkineto's daemon sockets: AF_UNIX SOCK_DGRAM on the abstract name and
// the path, SO_PASSCRED on both, every datagram decoded (DecodeDatagram)
// and handed over with the sender's credentials; the reply goes back from
// the socket the datagram came in on to the sender's own address
// (libkineto terminates on a reply from any other form of address).
// Replies never block: a sender whose queue is full misses one.
//
// Binding follows kineto.mode: `off` binds nothing; `on` fails Create when
// either socket cannot be had; `auto` logs why and serves what it can
// (another dynolog holding "\0dynolog\0", a live daemon at the path).
// A path socket file is replaced only when nothing is bound to it.
//
// Threading: Create on any thread before the loop runs; the rest on the
// loop's thread.
class KinetoServer {
 public:
  static absl::StatusOr<std::unique_ptr<KinetoServer>> Create(const KinetoServerOptions& options,
                                                              EventLoop* loop);
  ~KinetoServer();
  KinetoServer(const KinetoServer&) = delete;
  KinetoServer& operator=(const KinetoServer&) = delete;

  absl::Status Start(KinetoDatagramHandler* handler);
  // Stops reading, closes the sockets and removes the path socket file.
  void Stop();

  bool serving() const { return abstract_fd_.get() >= 0 || path_fd_.get() >= 0; }
  // mode, state, message, sockets (processes are the bridge's to add).
  v1::KinetoBridgeStatus Status() const;
  // Datagrams refused as malformed since Start.
  uint64_t malformed() const { return malformed_; }

 private:
  KinetoServer(const KinetoServerOptions& options, EventLoop* loop);
  absl::Status Bind();
  absl::Status BindPath();
  void OnReadable(KinetoSocket socket);
  // One datagram: false when the socket had none left.
  bool ReceiveOne(KinetoSocket socket, int fd);
  void Reply(int fd, const sockaddr_un& to, socklen_t to_len, const std::string& reply);

  const KinetoServerOptions options_;
  EventLoop* const loop_;
  KinetoDatagramHandler* handler_ = nullptr;
  ::gpuctl::UniqueFd abstract_fd_;
  ::gpuctl::UniqueFd path_fd_;
  std::string path_;         // the bound path socket, empty when none
  std::string unavailable_;  // why a socket is not served
  uint64_t malformed_ = 0;
  bool started_ = false;
};

}  // namespace gpuctl::daemon::kineto

#endif  // GPUCTL_DAEMON_KINETO_KINETO_SERVER_H_
