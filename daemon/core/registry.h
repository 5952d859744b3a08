#ifndef GPUCTL_DAEMON_CORE_REGISTRY_H_
#define GPUCTL_DAEMON_CORE_REGISTRY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/core/peer_channel.h"
#include "gpuctl/v1/ipc.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// IPC protocol version this daemon speaks.
inline constexpr uint32_t kIpcProtocolMajor = 1;
inline constexpr uint32_t kIpcProtocolMinor = 0;

// Limits on what a Hello may carry.
inline constexpr size_t kMaxJobIdBytes = 256;
inline constexpr size_t kMaxHostnameBytes = 255;
inline constexpr size_t kMaxCmdlineArgs = 256;
inline constexpr size_t kMaxCmdlineBytes = 64 * 1024;
inline constexpr size_t kMaxVersionBytes = 64;

// Checks a Hello against the kernel's credentials and the limits above:
// PERMISSION_DENIED for a pid that is not the peer's, FAILED_PRECONDITION for
// another protocol major, INVALID_ARGUMENT for oversized or bad fields.
//
// creds.pid is the peer's pid in the daemon's pid namespace; a process in a
// container claims its pid in its own namespace. A claim that differs from
// creds.pid is accepted only when `<proc_root>/<creds.pid>/status` says that
// is the peer's pid in its innermost namespace (the last NSpid entry).
absl::Status ValidateHello(const PeerCredentials& creds, const v1::ipc::Hello& hello,
                           absl::string_view proc_root = "/proc");

struct AttachedProcess {
  PeerId peer;
  // pid and uid come from the credentials, the rest from the Hello.
  v1::ProcessInfo info;
};

// Attached processes keyed by connection. Not thread-safe: owned by the
// event loop.
class Registry {
 public:
  // `proc_root` is where the daemon's view of /proc is (tests pass a fake).
  explicit Registry(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  // Validates and adds. ALREADY_EXISTS if the peer already said Hello.
  absl::Status Add(PeerId peer, const PeerCredentials& creds, const v1::ipc::Hello& hello,
                   absl::Time now);
  void Remove(PeerId peer);
  AttachedProcess* Find(PeerId peer);

  // Processes matching every criterion set in `selector` (job id and/or
  // pids); an empty selector matches all. Ordered by peer id (attach order).
  std::vector<AttachedProcess*> Select(const v1::ProcessSelector& selector);
  std::vector<const AttachedProcess*> All() const;
  size_t size() const { return processes_.size(); }

  // `3 attached: job "7" x2, job "" x1` (most common job first).
  std::string DescribeAttached() const;

 private:
  std::string proc_root_;
  absl::btree_map<PeerId, AttachedProcess> processes_;
};

// `job "42" and pids [1, 2]`, for messages.
std::string DescribeSelector(const v1::ProcessSelector& selector);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_REGISTRY_H_
