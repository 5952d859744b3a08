// Host context of a trace's processes (activities cpu / sched): when the
// recordings start and end, and the results waiting for their output.
#include <algorithm>
#include <utility>

#include "daemon/common/log.h"
#include "daemon/core/daemon_core_impl.h"

namespace gpuctl::daemon {
namespace {

// Recording starts this much before a time window, so the threads' events
// are open when the processes open theirs (a /proc scan and the opens take
// milliseconds); the events are cut to each process's own window.
constexpr absl::Duration kHostContextLead = absl::Milliseconds(100);
// A recording whose process has not delivered by this long after the
// window's end stops anyway: nothing is recorded outside a window.
constexpr absl::Duration kHostContextTail = absl::Milliseconds(500);

}  // namespace

void DaemonCoreImpl::PlanHostContext(TraceSession& session) {
  session.host_context = HostContextOf(session.request);
  if (!session.host_context.any()) return;
  const absl::Time now = deps_.clock->Now();
  // An iteration window opens when its step comes: record from the request.
  const absl::Time start = session.iteration_window() ? now : session.start - kHostContextLead;
  session.host_context_start_timer =
      deps_.loop->PostDelayed(std::max(start - now, absl::ZeroDuration()),
                              [this, weak = std::weak_ptr<bool>(alive_), trace_id = session.id] {
                                if (!weak.expired()) StartHostContext(trace_id);
                              });
  if (session.iteration_window()) return;
  session.host_context_end_timer =
      deps_.loop->PostDelayed(std::max(session.end + kHostContextTail - now, absl::ZeroDuration()),
                              [this, weak = std::weak_ptr<bool>(alive_), trace_id = session.id] {
                                if (!weak.expired()) EndHostContext(trace_id);
                              });
}

void DaemonCoreImpl::StartHostContext(const std::string& trace_id) {
  TraceSession* session = FindSession(trace_id);
  if (session == nullptr) return;
  session->host_context_start_timer = 0;
  if (session->finishing) return;
  session->host_context_started = true;
  for (TraceSlot& slot : session->slots) {
    if (!slot.done && !slot.processing) StartSlotHostContext(*session, slot);
  }
}

void DaemonCoreImpl::StartSlotHostContext(TraceSession& session, TraceSlot& slot) {
  if (slot.host_context_phase != HostContextPhase::kNone) return;
  if (deps_.host_context == nullptr) {
    slot.host_context = HostContextOutput{
        HostContextUnavailable("this daemon was started without host context recording"), nullptr};
    slot.host_context_phase = HostContextPhase::kReady;
    return;
  }
  slot.host_context_key = next_host_context_key_++;
  slot.host_context_phase = HostContextPhase::kRecording;
  HostContextWanted wanted = session.host_context;
  for (const TraceSlot& other : session.slots) {
    if (&other != &slot) wanted.recorded_apart.push_back(other.info.pid());
  }
  deps_.host_context->Start(slot.host_context_key, slot.info.pid(), std::move(wanted));
}

void DaemonCoreImpl::EndHostContext(const std::string& trace_id) {
  TraceSession* session = FindSession(trace_id);
  if (session == nullptr) return;
  session->host_context_end_timer = 0;
  for (TraceSlot& slot : session->slots) FinishSlotHostContext(*session, slot);
}

void DaemonCoreImpl::FinishSlotHostContext(TraceSession& session, TraceSlot& slot) {
  if (slot.host_context_phase != HostContextPhase::kRecording) return;
  slot.host_context_phase = HostContextPhase::kFinishing;
  // `done` may run on any thread: it only posts to the loop, and the core
  // is looked up there.
  deps_.host_context->Finish(
      slot.host_context_key,
      [loop = deps_.loop, weak = std::weak_ptr<bool>(alive_), this, trace_id = session.id,
       peer = slot.peer](HostContextOutput output) mutable {
        loop->Post([weak = std::move(weak), this, trace_id = std::move(trace_id), peer,
                    output = std::move(output)]() mutable {
          if (!weak.expired()) OnHostContextReady(trace_id, peer, std::move(output));
        });
      });
}

void DaemonCoreImpl::OnHostContextReady(const std::string& trace_id, PeerId peer,
                                        HostContextOutput output) {
  TraceSession* session = FindSession(trace_id);
  TraceSlot* slot = session == nullptr ? nullptr : session->FindSlot(peer);
  if (slot == nullptr || slot->done) return;  // its result came without trace data
  if (output.summary.state() == v1::HostContextResult::STATE_UNAVAILABLE) {
    LogWarning(
        "host context unavailable",
        {{"trace_id", trace_id}, {"pid", slot->info.pid()}, {"reason", output.summary.reason()}});
  }
  slot->host_context = std::move(output);
  slot->host_context_phase = HostContextPhase::kReady;
  auto waiting = after_host_context_.extract(slot->host_context_key);
  if (waiting.empty()) return;
  for (auto& then : waiting.mapped()) std::move(then)();
}

void DaemonCoreImpl::AfterHostContext(TraceSession& session, TraceSlot& slot,
                                      absl::AnyInvocable<void() &&> then) {
  // The process's window is over once its result is here.
  FinishSlotHostContext(session, slot);
  if (slot.host_context_phase == HostContextPhase::kFinishing) {
    after_host_context_[slot.host_context_key].push_back(std::move(then));
    return;
  }
  std::move(then)();
}

void DaemonCoreImpl::CancelHostContextTimers(TraceSession& session) {
  if (session.host_context_start_timer != 0) {
    deps_.loop->Cancel(session.host_context_start_timer);
    session.host_context_start_timer = 0;
  }
  if (session.host_context_end_timer != 0) {
    deps_.loop->Cancel(session.host_context_end_timer);
    session.host_context_end_timer = 0;
  }
}

}  // namespace gpuctl::daemon
