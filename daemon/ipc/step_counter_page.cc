#include "daemon/ipc/step_counter_page.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gpuctl/v1/step_page.h"

namespace gpuctl::daemon {
namespace {

constexpr int kStepPageSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

class MappedStepCounterPage final : public StepCounterView {
 public:
  explicit MappedStepCounterPage(const void* page) : page_(static_cast<const char*>(page)) {}
  ~MappedStepCounterPage() override { munmap(const_cast<char*>(page_), steps::kStepPageBytes); }
  MappedStepCounterPage(const MappedStepCounterPage&) = delete;
  MappedStepCounterPage& operator=(const MappedStepCounterPage&) = delete;

  StepReading Read() const override {
    StepPageFields fields;
    fields.magic = Load<uint32_t>(steps::kOffsetMagic);
    fields.version = Load<uint32_t>(steps::kOffsetVersion);
    fields.next_step = Load<uint64_t>(steps::kOffsetNextStep);
    fields.last_step_unix_ns = Load<int64_t>(steps::kOffsetLastStepNs);
    fields.period_ns = Load<int64_t>(steps::kOffsetPeriodNs);
    if (fields.version >= 2) {
      // The count first (acquire): entries it counts were written before.
      fields.durations_written = Load<uint64_t>(steps::kOffsetDurationsWritten, __ATOMIC_ACQUIRE);
      for (uint32_t i = 0; i < steps::kStepRingSize; ++i) {
        fields.durations[i] = Load<int64_t>(steps::kOffsetDurations + 8 * i);
      }
    }
    return InterpretStepPage(fields);
  }

 private:
  // The page is shared with the process that writes it, so every field is
  // read with one relaxed atomic load of its own size; the offsets are
  // naturally aligned within the page-aligned mapping.
  template <typename T>
  T Load(uint32_t offset, int order = __ATOMIC_RELAXED) const {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8);
    const void* at = page_ + offset;
    return __atomic_load_n(static_cast<const T*>(at), order);
  }

  const char* const page_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepCounterView>> MapStepCounterPage(UniqueFd fd) {
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fstat on the step counter fd: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError("step counter fd is not a regular file (memfd expected)");
  }
  int seals = fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step counter fd does not support seals (memfd expected): ", std::strerror(errno)));
  }
  if ((seals & kStepPageSeals) != kStepPageSeals) {
    return absl::InvalidArgumentError(
        absl::StrCat("step counter memfd is not sealed against shrink, grow and sealing (seals=0x",
                     absl::Hex(seals), ")"));
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) != steps::kStepPageBytes) {
    return absl::InvalidArgumentError(absl::StrCat("step counter memfd holds ", st.st_size,
                                                   " bytes, expected ", steps::kStepPageBytes));
  }
  void* page = mmap(nullptr, steps::kStepPageBytes, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (page == MAP_FAILED) {
    return absl::InvalidArgumentError(
        absl::StrCat("mmap of the step counter memfd: ", std::strerror(errno)));
  }
  return std::make_unique<MappedStepCounterPage>(page);
}

}  // namespace gpuctl::daemon
