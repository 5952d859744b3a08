#include "daemon/hostctx/host_context_service.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/hostctx/symbolizer.h"

namespace gpuctl::hostctx {
namespace {

v1::HostContextResult Unavailable(std::string reason) {
  v1::HostContextResult result;
  result.set_state(v1::HostContextResult::STATE_UNAVAILABLE);
  result.set_reason(std::move(reason));
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostContextService>> HostContextService::Create(
    HostContextServiceOptions options, Clock* clock) {
  absl::StatusOr<std::unique_ptr<daemon::EventLoop>> loop = daemon::EventLoop::Create();
  if (!loop.ok()) return loop.status();
  return std::unique_ptr<HostContextService>(
      new HostContextService(std::move(options), clock, *std::move(loop)));
}

HostContextService::HostContextService(HostContextServiceOptions options, Clock* clock,
                                       std::unique_ptr<daemon::EventLoop> loop)
    : options_(std::move(options)),
      clock_(clock),
      loop_(std::move(loop)),
      // Symbolization reads the processes' ELF files: below the daemon's
      // own work, never competing with the traced jobs.
      symbolizer_(1, ThreadPriority{.nice = 10}),
      thread_([this] { loop_->Run(); }) {}

HostContextService::~HostContextService() { Shutdown(); }

void HostContextService::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // The recorders close their events on the loop's thread, which owns them.
  loop_->Post([this] {
    recordings_.clear();
    loop_->Quit();
  });
  thread_.join();
  symbolizer_.Shutdown();
}

void HostContextService::Start(uint64_t key, pid_t pid, bool samples, bool switches, bool dwarf,
                               std::vector<pid_t> apart) {
  loop_->Post([this, key, pid, samples, switches, dwarf, apart = std::move(apart)] {
    StartOnLoop(key, pid, samples, switches, dwarf, apart);
  });
}

void HostContextService::Finish(uint64_t key, Done done) {
  loop_->Post(
      [this, key, done = std::move(done)]() mutable { FinishOnLoop(key, std::move(done)); });
}

void HostContextService::StartOnLoop(uint64_t key, pid_t pid, bool samples, bool switches,
                                     bool dwarf, const std::vector<pid_t>& apart) {
  Recording recording;
  recording.samples = samples;
  recording.switches = switches;
  if (recordings_.size() >= options_.max_recordings) {
    recording.started = absl::ResourceExhaustedError(
        absl::StrCat("more than ", options_.max_recordings, " processes recorded at once"));
  } else {
    RecorderOptions recorder = options_.recorder;
    recorder.sampler.dwarf_unwind = dwarf;
    recorder.sampler.switch_stacks = switches;
    recorder.sampler.cpu_wide_switches = switches;
    recording.recorder = std::make_unique<HostContextRecorder>(recorder, clock_, loop_.get());
    recording.started = recording.recorder->Start({pid}, apart);
  }
  recordings_.insert_or_assign(key, std::move(recording));
}

void HostContextService::FinishOnLoop(uint64_t key, Done done) {
  auto it = recordings_.find(key);
  if (it == recordings_.end()) {
    std::move(done)(Unavailable("the recording was never started"), nullptr);
    return;
  }
  Recording recording = std::move(it->second);
  recordings_.erase(it);
  if (!recording.started.ok()) {
    std::move(done)(Unavailable(std::string(recording.started.message())), nullptr);
    return;
  }
  HostCapture capture = recording.recorder->Finish();
  recording.recorder.reset();
  symbolizer_.Run([proc_root = options_.recorder.sampler.proc_root, capture = std::move(capture),
                   samples = recording.samples, switches = recording.switches,
                   done = std::move(done)]() mutable {
    // The images (and the roots they hold open) live as long as the
    // symbolizer, not as long as the events.
    Symbolizer symbolizer(proc_root, std::move(capture.images));
    capture.images.clear();
    absl::flat_hash_map<pid_t, pid_t> own_tids = NamespaceThreadIds(proc_root, capture);
    auto events = std::make_shared<const WindowEvents>(std::move(capture), &symbolizer, samples,
                                                       switches, std::move(own_tids));
    v1::HostContextResult summary = events->Summary();
    std::move(done)(std::move(summary), std::move(events));
  });
}

}  // namespace gpuctl::hostctx
