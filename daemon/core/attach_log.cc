#include "daemon/core/attach_log.h"

#include <utility>

#include "absl/strings/str_join.h"
#include "daemon/common/log.h"

namespace gpuctl::daemon {
namespace {

// Program names a summary lists; more are counted only.
constexpr size_t kMaxSummaryPrograms = 8;

}  // namespace

AttachLog::AttachLog(TaskRunner* loop, Clock* clock, Options options)
    : loop_(loop), clock_(clock), options_(options) {}

AttachLog::~AttachLog() {
  for (auto& [peer, pending] : pending_) {
    if (pending.timer != 0) loop_->Cancel(pending.timer);
  }
  if (summary_timer_ != 0) loop_->Cancel(summary_timer_);
  FlushSummary();
}

void AttachLog::Attached(PeerId peer, Process process) {
  if (options_.settle <= absl::ZeroDuration()) {
    LogAttached(peer, process);
    return;
  }
  Pending& pending = pending_[peer];
  pending.process = std::move(process);
  pending.attached = clock_->Now();
  pending.timer = loop_->PostDelayed(options_.settle, [this, peer] {
    auto it = pending_.find(peer);
    if (it == pending_.end()) return;
    it->second.timer = 0;
    Noteworthy(peer);
  });
}

void AttachLog::Noteworthy(PeerId peer) {
  auto it = pending_.find(peer);
  if (it == pending_.end()) return;
  if (it->second.timer != 0) loop_->Cancel(it->second.timer);
  const Process process = std::move(it->second.process);
  pending_.erase(it);
  LogAttached(peer, process);
}

void AttachLog::LogAttached(PeerId peer, const Process& process) {
  logged_[peer] = process.pid;
  LogInfo("process attached", {{"peer", peer},
                               {"pid", process.pid},
                               {"program", process.program},
                               {"job_id", process.job_id},
                               {"rank", process.rank},
                               {"labels", process.labels},
                               {"step_counter", process.step_counter ? "true" : "false"},
                               {"library_version", process.library_version}});
}

void AttachLog::Detached(PeerId peer, bool clean, absl::string_view reason, bool in_trace) {
  if (in_trace) Noteworthy(peer);
  if (auto it = pending_.find(peer); it != pending_.end()) {
    // Gone before it settled: counted, not logged.
    if (it->second.timer != 0) loop_->Cancel(it->second.timer);
    ++short_lived_;
    if (programs_.size() < kMaxSummaryPrograms) programs_.insert(it->second.process.program);
    pending_.erase(it);
    if (summary_timer_ == 0) {
      summary_timer_ = loop_->PostDelayed(options_.summary_every, [this] {
        summary_timer_ = 0;
        FlushSummary();
      });
    }
    return;
  }
  auto it = logged_.find(peer);
  if (it == logged_.end()) return;
  LogInfo("process detached", {{"peer", peer},
                               {"pid", it->second},
                               {"clean", clean ? "true" : "false"},
                               {"reason", reason}});
  logged_.erase(it);
}

void AttachLog::FlushSummary() {
  if (short_lived_ == 0) return;
  LogInfo("short-lived processes attached and left",
          {{"count", short_lived_},
           {"within", absl::FormatDuration(options_.settle)},
           {"programs", absl::StrJoin(programs_, ",")},
           {"period", absl::FormatDuration(options_.summary_every)}});
  short_lived_ = 0;
  programs_.clear();
}

}  // namespace gpuctl::daemon
