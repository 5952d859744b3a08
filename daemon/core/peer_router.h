#ifndef GPUCTL_DAEMON_CORE_PEER_ROUTER_H_
#define GPUCTL_DAEMON_CORE_PEER_ROUTER_H_

#include "daemon/core/peer_channel.h"

namespace gpuctl::daemon {

// The core's one PeerChannel in front of two: kineto peers (IsKinetoPeer)
// go to `kineto`, every other to `library`. Either may be null until set
// (then a send to it fails as to a gone peer). Loop thread only.
class PeerRouter final : public PeerChannel {
 public:
  void set_library(PeerChannel* library) { library_ = library; }
  void set_kineto(PeerChannel* kineto) { kineto_ = kineto; }

  absl::Status Send(PeerId peer, const v1::ipc::DaemonMessage& message) override {
    PeerChannel* channel = For(peer);
    if (channel == nullptr) return absl::UnavailableError("no channel serves this process");
    return channel->Send(peer, message);
  }
  void Disconnect(PeerId peer, absl::string_view reason) override {
    if (PeerChannel* channel = For(peer)) channel->Disconnect(peer, reason);
  }
  absl::Time EarliestStart(PeerId peer, absl::Time now) override {
    PeerChannel* channel = For(peer);
    return channel == nullptr ? now : channel->EarliestStart(peer, now);
  }
  void DescribePeer(PeerId peer, v1::ProcessInfo* info) override {
    if (PeerChannel* channel = For(peer)) channel->DescribePeer(peer, info);
  }
  std::string ExplainMissingResult(PeerId peer, absl::string_view trace_id) override {
    PeerChannel* channel = For(peer);
    return channel == nullptr ? "" : channel->ExplainMissingResult(peer, trace_id);
  }
  void DescribeStatus(v1::GetStatusResponse* status) override {
    if (library_ != nullptr) library_->DescribeStatus(status);
    if (kineto_ != nullptr) kineto_->DescribeStatus(status);
  }

 private:
  PeerChannel* For(PeerId peer) const { return IsKinetoPeer(peer) ? kineto_ : library_; }

  PeerChannel* library_ = nullptr;
  PeerChannel* kineto_ = nullptr;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CORE_PEER_ROUTER_H_
