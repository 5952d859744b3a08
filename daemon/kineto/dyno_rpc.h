#ifndef GPUCTL_DAEMON_KINETO_DYNO_RPC_H_
#define GPUCTL_DAEMON_KINETO_DYNO_RPC_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/common/event_loop.h"
#include "daemon/kineto/dyno_rpc_listen.h"

namespace gpuctl::daemon {

inline constexpr size_t kDynoMaxMessageBytes = 64 << 10;

struct DynoRpcOptions {
  // A loopback address and port: "127.0.0.1:1778", "localhost:1778",
  // "[::1]:1778". Port 0 picks a free one.
  std::string listen = kDefaultDynoRpcListen;
  size_t max_message_bytes = kDynoMaxMessageBytes;
  size_t max_connections = 16;
  // A connection that has not had its answer within this is closed.
  absl::Duration idle_timeout = absl::Seconds(10);
};

// dynolog's RPC transport: TCP, each message a 4-byte length in the host's
// byte order (as dynolog and its `dyno` CLI write it) followed by that many
// bytes of JSON. One request and one answer per connection, as dynolog
// serves them; a length of 0, a negative one or one over max_message_bytes
// gets an error answer and the connection closes. Non-blocking, on the
// daemon's event loop: every socket is watched by `loop`, no call waits.
//
// Threading: Create, Stop and the destructor on the loop's thread (or
// before it runs); `handler` runs there too.
class DynoRpcServer {
 public:
  using Handler = absl::AnyInvocable<std::string(absl::string_view request)>;
  static absl::StatusOr<std::unique_ptr<DynoRpcServer>> Create(const DynoRpcOptions& options,
                                                               EventLoop* loop, Handler handler);
  ~DynoRpcServer();
  DynoRpcServer(const DynoRpcServer&) = delete;
  DynoRpcServer& operator=(const DynoRpcServer&) = delete;

  // "127.0.0.1:41234": the bound address, port resolved.
  const std::string& address() const { return address_; }
  // Closes the listener and every connection.
  void Stop();

 private:
  struct Connection {
    int fd = -1;
    std::string in;
    std::string out;
    size_t sent = 0;
    TaskRunner::TimerId timer = 0;
  };

  DynoRpcServer(const DynoRpcOptions& options, EventLoop* loop, Handler handler, int listen_fd,
                std::string address);
  void OnAcceptable();
  void OnConnectionEvent(int fd, uint32_t events);
  // Reads what is there; false when the connection is to close.
  bool ReadRequest(Connection& c);
  void Answer(Connection& c, const std::string& body);
  bool WriteAnswer(Connection& c);
  void Close(int fd);

  const DynoRpcOptions options_;
  EventLoop* loop_;
  Handler handler_;
  int listen_fd_;
  std::string address_;
  absl::flat_hash_map<int, std::unique_ptr<Connection>> connections_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_KINETO_DYNO_RPC_H_
