#ifndef GPUCTL_DAEMON_HOSTCTX_PERF_RECORD_H_
#define GPUCTL_DAEMON_HOSTCTX_PERF_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace gpuctl::hostctx {

// The records the sampler's perf events produce (sample_type
// PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN, sample_id_all),
// decoded from bytes the kernel wrote into a ring buffer that the traced
// side cannot touch, yet checked field by field all the same: a record that
// does not fit its own header's size is rejected, never read past.

// Call chains longer than this are cut (the kernel's own default
// perf_event_max_stack is 127).
inline constexpr size_t kMaxCallchainDepth = 512;

struct CpuSample {
  uint32_t pid = 0;  // the thread group (process) id
  uint32_t tid = 0;
  uint64_t time_ns = 0;  // CLOCK_REALTIME
  // User-space return addresses, innermost first; the kernel's context
  // markers (PERF_CONTEXT_USER, ...) are left out.
  std::vector<uint64_t> ips;
};

struct ContextSwitch {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time_ns = 0;
  bool out = false;        // switched out (else in)
  bool preempted = false;  // switched out while still runnable
};

struct LostRecords {
  uint64_t count = 0;
};

// Any other record type: skipped, counted.
struct OtherRecord {
  uint32_t type = 0;
};

using PerfRecord = std::variant<CpuSample, ContextSwitch, LostRecords, OtherRecord>;

// Decodes one whole record (its 8-byte header included).
absl::StatusOr<PerfRecord> ParseRecord(absl::Span<const uint8_t> record);

struct RingDrainStats {
  uint64_t records = 0;
  // The ring held bytes that are not a record (a size under the header's,
  // past the written data or over the ring): the rest of what was written
  // is skipped.
  uint64_t corrupt = 0;
};

// Copies each whole record between `tail` and `head` out of the ring's data
// area (`data`, a power-of-two size), joining the two halves of one that
// wraps around, and hands it to `on_record`. Returns the new tail: `head`
// once everything was consumed. `head` and `tail` are the kernel's
// free-running byte counters.
uint64_t DrainRing(absl::Span<const uint8_t> data, uint64_t head, uint64_t tail,
                   absl::FunctionRef<void(absl::Span<const uint8_t>)> on_record,
                   RingDrainStats* stats);

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_PERF_RECORD_H_
