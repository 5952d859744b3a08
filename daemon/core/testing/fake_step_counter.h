#ifndef GPUCTL_DAEMON_CORE_TESTING_FAKE_STEP_COUNTER_H_
#define GPUCTL_DAEMON_CORE_TESTING_FAKE_STEP_COUNTER_H_

#include <memory>
#include <utility>

#include "daemon/core/steps.h"

namespace gpuctl::testing {

// A step counter the test moves: the view reads `reading` live, as the
// real one reads the shared page. Loop-thread only.
class FakeStepCounter final : public daemon::StepCounterView {
 public:
  explicit FakeStepCounter(std::shared_ptr<daemon::StepReading> reading)
      : reading_(std::move(reading)) {}
  daemon::StepReading Read() const override { return *reading_; }

 private:
  std::shared_ptr<daemon::StepReading> reading_;
};

// A reading at `step`, marked at `at`, with mean period `period`.
inline std::shared_ptr<daemon::StepReading> StepsAt(uint64_t step, absl::Time at,
                                                    absl::Duration period) {
  auto reading = std::make_shared<daemon::StepReading>();
  reading->has_step = true;
  reading->current_step = step;
  reading->last_step_time = at;
  reading->period = period;
  return reading;
}

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_CORE_TESTING_FAKE_STEP_COUNTER_H_
