#ifndef GPUCTL_DAEMON_CORE_TESTING_FAKE_PEER_CHANNEL_H_
#define GPUCTL_DAEMON_CORE_TESTING_FAKE_PEER_CHANNEL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/core/peer_channel.h"

namespace gpuctl::testing {

// Records every message the core sends. Loop-thread only, like the real one.
class FakePeerChannel final : public daemon::PeerChannel {
 public:
  struct Sent {
    daemon::PeerId peer;
    v1::ipc::DaemonMessage message;
  };

  absl::Status Send(daemon::PeerId peer, const v1::ipc::DaemonMessage& message) override {
    if (auto it = send_errors_.find(peer); it != send_errors_.end()) return it->second;
    sent_.push_back({peer, message});
    return absl::OkStatus();
  }
  void Disconnect(daemon::PeerId peer, absl::string_view reason) override {
    disconnected_.emplace_back(peer, std::string(reason));
  }
  absl::Time EarliestStart(daemon::PeerId peer, absl::Time now) override {
    auto it = earliest_.find(peer);
    return it == earliest_.end() ? now : now + it->second;
  }
  void DescribePeer(daemon::PeerId peer, v1::ProcessInfo* info) override {
    if (daemon::IsKinetoPeer(peer)) info->set_kind(v1::PROCESS_KIND_KINETO);
  }

  // `peer` can open a window no sooner than `delay` after it is asked.
  void SetStartDelay(daemon::PeerId peer, absl::Duration delay) { earliest_[peer] = delay; }

  // Makes every later Send to `peer` fail with `status`.
  void FailSendsTo(daemon::PeerId peer, absl::Status status) {
    send_errors_[peer] = std::move(status);
  }

  const std::vector<Sent>& sent() const { return sent_; }
  std::vector<Sent> SentTo(daemon::PeerId peer) const {
    std::vector<Sent> out;
    for (const Sent& s : sent_) {
      if (s.peer == peer) out.push_back(s);
    }
    return out;
  }
  const std::vector<std::pair<daemon::PeerId, std::string>>& disconnected() const {
    return disconnected_;
  }
  void Clear() { sent_.clear(); }

 private:
  std::vector<Sent> sent_;
  std::vector<std::pair<daemon::PeerId, std::string>> disconnected_;
  absl::flat_hash_map<daemon::PeerId, absl::Status> send_errors_;
  absl::flat_hash_map<daemon::PeerId, absl::Duration> earliest_;
};

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_CORE_TESTING_FAKE_PEER_CHANNEL_H_
