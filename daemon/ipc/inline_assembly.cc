#include "daemon/ipc/inline_assembly.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/ipc/payload.h"

namespace gpuctl::daemon {
namespace {

// Without a cap, buffers grow with the chunks; only this much is reserved
// up front on the strength of an announced size. With a cap the announced
// size is reserved once admitted: it is counted already.
constexpr size_t kInlineInitialReserve = 16u << 20;

}  // namespace

InlineAssembler::InlineAssembler(IngestAdmission* budget, TaskRunner* loop, AdmittedFn on_admitted)
    : budget_(budget),
      loop_(loop),
      on_admitted_(std::move(on_admitted)),
      self_(std::make_shared<InlineAssembler*>(this)) {}

InlineAssembler::~InlineAssembler() {
  // Their start callbacks point here: none may run once this is gone.
  absl::flat_hash_map<PeerId, std::unique_ptr<Assembly>> pending = std::move(pending_);
  pending_.clear();
  for (const auto& [peer, assembly] : pending) {
    if (!budget_->Cancel(assembly->budget_id)) budget_->Release(assembly->budget_id);
  }
}

bool InlineAssembler::Begin(PeerId peer, const v1::ipc::CaptureResult& result) {
  auto assembly = std::make_unique<Assembly>();
  assembly->result = result;
  Assembly& entry = *assembly;
  pending_[peer] = std::move(assembly);
  // The start callback may run inside Submit.
  entry.budget_id = budget_->Submit(result.payload_size(),
                                    [this, peer](IngestAdmission::Id) { OnAdmitted(peer); });
  return entry.admitted;
}

absl::StatusOr<std::unique_ptr<Payload>> InlineAssembler::AddChunk(
    PeerId peer, const v1::ipc::PayloadChunk& chunk, v1::ipc::CaptureResult* result) {
  auto it = pending_.find(peer);
  if (it == pending_.end()) {
    return absl::InvalidArgumentError("PayloadChunk without an inline CaptureResult");
  }
  Assembly& pending = *it->second;
  if (chunk.trace_id() != pending.result.trace_id()) {
    return absl::InvalidArgumentError("PayloadChunk for another trace");
  }
  const uint64_t have = pending.buffer.size();
  const uint64_t want = pending.result.payload_size();
  if (chunk.offset() != have) {
    return absl::InvalidArgumentError(
        absl::StrCat("PayloadChunk at offset ", chunk.offset(), ", expected ", have));
  }
  if (chunk.data().empty() || chunk.data().size() > want - have) {
    return absl::InvalidArgumentError(absl::StrCat("PayloadChunk of ", chunk.data().size(),
                                                   " bytes at ", have,
                                                   " does not fit the announced ", want, " bytes"));
  }
  pending.buffer.insert(pending.buffer.end(), chunk.data().begin(), chunk.data().end());
  if (pending.buffer.size() < want) return nullptr;
  std::unique_ptr<Assembly> done = std::move(it->second);
  pending_.erase(it);
  *result = done->result;
  return TakePayload(std::move(done));
}

void InlineAssembler::Abandon(PeerId peer) {
  auto it = pending_.find(peer);
  if (it == pending_.end()) return;
  const IngestAdmission::Id id = it->second->budget_id;
  // The bytes go before others are admitted.
  pending_.erase(it);
  if (!budget_->Cancel(id)) budget_->Release(id);
}

void InlineAssembler::OnAdmitted(PeerId peer) {
  auto it = pending_.find(peer);
  if (it == pending_.end()) return;
  Assembly& assembly = *it->second;
  assembly.admitted = true;
  const uint64_t size = assembly.result.payload_size();
  assembly.buffer.reserve(
      budget_->max_bytes() > 0 ? size : std::min<uint64_t>(size, kInlineInitialReserve));
  on_admitted_(peer);
}

std::unique_ptr<Payload> InlineAssembler::TakePayload(std::unique_ptr<Assembly> assembly) {
  std::weak_ptr<InlineAssembler*> weak = self_;
  TaskRunner* loop = loop_;
  const IngestAdmission::Id id = assembly->budget_id;
  // The core may have released the entry already (after converting); a
  // second release of it does nothing.
  auto release = [loop, weak, id] {
    loop->Post([weak, id] {
      std::shared_ptr<InlineAssembler*> self = weak.lock();
      if (self != nullptr) (*self)->budget_->Release(id);
    });
  };
  return std::make_unique<BufferPayload>(std::move(assembly->buffer), std::move(release), id);
}

}  // namespace gpuctl::daemon
