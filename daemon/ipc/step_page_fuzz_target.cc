// libFuzzer entry point for the step counter page a client shares with the
// daemon: the input is the page's content (zero-padded to the page size),
// placed in a sealed memfd and read through the daemon's real mapping
// (MapStepCounterPage). Invariants: the mapping of a well-sealed page of the
// right size is accepted; what it reads equals InterpretStepPage of the
// fields decoded independently from the bytes; and a reading never carries
// an implausible step, a non-positive time or a period or recent step
// duration outside (0, 1 day]; version 1 and 2 pages are both read.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "daemon/core/steps.h"
#include "daemon/ipc/step_counter_page.h"
#include "gpuctl/v1/step_page.h"

namespace {

using gpuctl::daemon::StepPageFields;
using gpuctl::daemon::StepReading;

template <typename T>
T LittleEndianAt(const std::string& page, uint32_t offset) {
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<uint64_t>(static_cast<uint8_t>(page[offset + i])) << (8 * i);
  }
  return static_cast<T>(value);
}

void CheckPlausible(const StepReading& r) {
  if (!r.has_step && (r.current_step != 0 || r.last_step_time || r.period)) std::abort();
  if (r.current_step > gpuctl::daemon::kMaxPlausibleStep) std::abort();
  if (r.last_step_time && *r.last_step_time <= absl::UnixEpoch()) std::abort();
  if (r.period &&
      (*r.period <= absl::ZeroDuration() || *r.period > gpuctl::daemon::kMaxPlausibleStepPeriod)) {
    std::abort();
  }
  if (r.recent_durations.size() > gpuctl::steps::kStepRingSize) std::abort();
  for (absl::Duration d : r.recent_durations) {
    if (d <= absl::ZeroDuration() || d > gpuctl::daemon::kMaxPlausibleStepPeriod) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace steps = gpuctl::steps;
  std::string page(reinterpret_cast<const char*>(data),  // NOLINT
                   std::min<size_t>(size, steps::kStepPageBytes));
  page.resize(steps::kStepPageBytes, '\0');

  StepPageFields fields;
  fields.magic = LittleEndianAt<uint32_t>(page, steps::kOffsetMagic);
  fields.version = LittleEndianAt<uint32_t>(page, steps::kOffsetVersion);
  fields.next_step = LittleEndianAt<uint64_t>(page, steps::kOffsetNextStep);
  fields.last_step_unix_ns = LittleEndianAt<int64_t>(page, steps::kOffsetLastStepNs);
  fields.period_ns = LittleEndianAt<int64_t>(page, steps::kOffsetPeriodNs);
  fields.durations_written = LittleEndianAt<uint64_t>(page, steps::kOffsetDurationsWritten);
  for (uint32_t i = 0; i < steps::kStepRingSize; ++i) {
    fields.durations[i] = LittleEndianAt<int64_t>(page, steps::kOffsetDurations + 8 * i);
  }
  const StepReading expected = gpuctl::daemon::InterpretStepPage(fields);
  CheckPlausible(expected);

  const int fd = memfd_create("gpuctl-step-fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) std::abort();
  if (write(fd, page.data(), page.size()) != static_cast<ssize_t>(page.size())) std::abort();
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) std::abort();
  auto view = gpuctl::daemon::MapStepCounterPage(gpuctl::daemon::UniqueFd(fd));
  if (!view.ok()) std::abort();
  const StepReading read = (*view)->Read();
  if (read.has_step != expected.has_step || read.current_step != expected.current_step ||
      read.last_step_time != expected.last_step_time || read.period != expected.period ||
      read.durations_total != expected.durations_total ||
      read.recent_durations != expected.recent_durations) {
    std::abort();
  }
  return 0;
}
