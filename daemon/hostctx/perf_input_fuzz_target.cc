// libFuzzer entry point for what the host sampler and symbolizer read from
// outside: ring-buffer bytes (drained and parsed as perf records) and perf
// maps (a process's own file). The first byte picks which; the rest is the
// input. Neither may read out of bounds, and what they accept must hold
// their contracts.
#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/hostctx/perf_map.h"
#include "daemon/hostctx/perf_record.h"

namespace {

namespace hostctx = gpuctl::hostctx;

void CheckRecord(absl::Span<const uint8_t> record) {
  perf_event_header header{};
  if (record.size() < sizeof(header)) std::abort();
  std::memcpy(&header, record.data(), sizeof(header));
  if (header.size != record.size()) std::abort();
  // As the default sampler reads them, and as a DWARF-unwinding one does.
  for (const bool unwind : {false, true}) {
    auto parsed = hostctx::ParseRecord(record, {.user_regs = unwind, .user_stack = unwind});
    if (!parsed.ok()) {
      if (parsed.status().message().empty()) std::abort();
      continue;
    }
    if (const auto* sample = std::get_if<hostctx::CpuSample>(&*parsed)) {
      if (sample->ips.size() > hostctx::kMaxCallchainDepth) std::abort();
      for (uint64_t ip : sample->ips) {
        if (ip >= static_cast<uint64_t>(PERF_CONTEXT_MAX)) std::abort();
      }
      // Registers and stack come together or not at all, the stack within
      // the record.
      if (sample->user_regs.empty() != sample->user_stack.empty()) std::abort();
      if (!sample->user_regs.empty() && sample->user_regs.size() != hostctx::kUnwindRegsCount) {
        std::abort();
      }
      if (sample->user_stack.size() > record.size()) std::abort();
    }
  }
}

void DrainAsRing(const uint8_t* data, size_t size) {
  // The ring is the input padded to a power of two, written from `tail`
  // (the first byte) to the input's end.
  if (size == 0) return;
  size_t ring_size = 8;
  while (ring_size < size) ring_size *= 2;
  std::vector<uint8_t> ring(ring_size, 0);
  std::memcpy(ring.data(), data, size);
  const uint64_t tail = data[0] % 16;
  hostctx::RingDrainStats stats;
  const uint64_t new_tail = hostctx::DrainRing(ring, size, tail, CheckRecord, &stats);
  if (new_tail != size) std::abort();
  // The same bytes rotated so that they wrap around the ring's end.
  std::vector<uint8_t> rotated(ring_size, 0);
  const uint64_t start = ring_size - size / 2;
  for (size_t i = 0; i < size; ++i) rotated[(start + i) % ring_size] = data[i];
  hostctx::DrainRing(rotated, start + size, start + tail, CheckRecord, &stats);
}

void ParsePerfMap(const uint8_t* data, size_t size) {
  const hostctx::PerfMap map = hostctx::PerfMap::Parse(
      absl::string_view(reinterpret_cast<const char*>(data), size));  // NOLINT
  for (uint64_t address : {uint64_t{0}, uint64_t{0x1000}, uint64_t{0x7f0000001010}, ~uint64_t{0}}) {
    const hostctx::PerfMap::Entry* entry = map.Find(address);
    if (entry == nullptr) continue;
    if (address < entry->start || address - entry->start >= entry->size) std::abort();
    if (entry->name.empty() || entry->name.size() > hostctx::PerfMap::kMaxNameBytes) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    DrainAsRing(data + 1, size - 1);
  } else {
    ParsePerfMap(data + 1, size - 1);
  }
  return 0;
}
