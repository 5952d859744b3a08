#include "daemon/runtime/host_context_wiring.h"

#include <utility>
#include <vector>

namespace gpuctl::daemon {
namespace {

class WindowEventsView final : public HostContextEvents {
 public:
  explicit WindowEventsView(std::shared_ptr<const hostctx::WindowEvents> events)
      : events_(std::move(events)) {}
  Written Write(int64_t base_time_ns, int64_t window_start_ns, int64_t window_end_ns,
                absl::FunctionRef<void(absl::string_view)> sink) const override {
    hostctx::WindowEvents::Written written =
        events_->Write(base_time_ns, window_start_ns, window_end_ns, sink);
    return {.samples = written.samples, .off_cpu_intervals = written.off_cpu_intervals};
  }

 private:
  std::shared_ptr<const hostctx::WindowEvents> events_;
};

}  // namespace

void HostContextWiring::Start(Key key, int32_t pid, HostContextWanted wanted) {
  service_->Start(key, pid, wanted.samples, wanted.switches, wanted.dwarf,
                  std::vector<pid_t>(wanted.recorded_apart.begin(), wanted.recorded_apart.end()));
}

void HostContextWiring::Finish(Key key, Done done) {
  service_->Finish(
      key, [done = std::move(done)](v1::HostContextResult summary,
                                    std::shared_ptr<const hostctx::WindowEvents> events) mutable {
        HostContextOutput output{std::move(summary), nullptr};
        if (events != nullptr)
          output.events = std::make_shared<WindowEventsView>(std::move(events));
        std::move(done)(std::move(output));
      });
}

}  // namespace gpuctl::daemon
