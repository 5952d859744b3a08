#ifndef GPUCTL_DAEMON_IPC_INLINE_ASSEMBLY_H_
#define GPUCTL_DAEMON_IPC_INLINE_ASSEMBLY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/ingest_admission.h"
#include "daemon/core/peer_channel.h"
#include "gpuctl/v1/ipc.pb.h"

namespace gpuctl::daemon {

// Reassembles inline payloads (a CaptureResult, then PayloadChunks) per
// peer, within the core's ingest budget (DaemonCore::ingest(), shared with
// the core's own conversions): a payload's announced size is reserved from
// its CaptureResult until the reassembled buffer handed on is converted or
// dropped. Admission is FIFO; a payload is to be read only once admitted.
//
// Threading: every method runs on `loop`'s thread; the payload handed on
// may be dropped on any thread (its release is posted to the loop).
// `on_admitted` runs inside Begin, Abandon or a posted release, after the
// state is updated, so it may call back in.
class InlineAssembler {
 public:
  using AdmittedFn = absl::AnyInvocable<void(PeerId)>;

  // `budget` must outlive the assembler.
  InlineAssembler(IngestAdmission* budget, TaskRunner* loop, AdmittedFn on_admitted);
  // Gives back the room of every payload still being received or waiting.
  ~InlineAssembler();
  InlineAssembler(const InlineAssembler&) = delete;
  InlineAssembler& operator=(const InlineAssembler&) = delete;

  // Starts `peer`'s payload announced by `result` (payload_size > 0); the
  // peer has none pending. True when admitted at once.
  bool Begin(PeerId peer, const v1::ipc::CaptureResult& result);
  bool HasPending(PeerId peer) const { return pending_.contains(peer); }
  // The CaptureResult of `peer`'s pending payload; null when none.
  const v1::ipc::CaptureResult* PendingResult(PeerId peer) const {
    auto it = pending_.find(peer);
    return it == pending_.end() ? nullptr : &it->second->result;
  }
  // Adds the next chunk of `peer`'s pending payload. INVALID_ARGUMENT
  // (naming what does not add up) for a chunk without a payload, of
  // another trace, out of order or past the announced size. Null while
  // bytes are missing; once complete, the payload (the pending one ends)
  // and its CaptureResult in `*result`.
  absl::StatusOr<std::unique_ptr<Payload>> AddChunk(PeerId peer, const v1::ipc::PayloadChunk& chunk,
                                                    v1::ipc::CaptureResult* result);
  // Forgets `peer`'s pending payload, if any, and frees its room.
  void Abandon(PeerId peer);

 private:
  struct Assembly {
    v1::ipc::CaptureResult result;
    std::vector<uint8_t> buffer;
    IngestAdmission::Id budget_id = 0;
    bool admitted = false;
  };

  void OnAdmitted(PeerId peer);
  // The reassembled payload; its room is freed (on the loop) once dropped.
  std::unique_ptr<Payload> TakePayload(std::unique_ptr<Assembly> assembly);

  IngestAdmission* const budget_;
  TaskRunner* const loop_;
  AdmittedFn on_admitted_;
  absl::flat_hash_map<PeerId, std::unique_ptr<Assembly>> pending_;
  // Releases posted to the loop hold a weak reference and do nothing once
  // the assembler is gone.
  std::shared_ptr<InlineAssembler*> self_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_IPC_INLINE_ASSEMBLY_H_
