// libFuzzer entry point for what the host sampler and symbolizer read from
// outside: ring-buffer bytes (drained and parsed as perf records), perf
// maps (a process's own file) and /proc/<pid>/maps text (its paths are the
// process's to choose), replayed into a Symbolizer as a process's image.
// The first byte picks which (0, 2: ring; 1: perf map; 3: maps); the rest is
// the input. None may read out of bounds, and what they accept must hold
// their contracts.
#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "daemon/hostctx/perf_map.h"
#include "daemon/hostctx/perf_record.h"
#include "daemon/hostctx/process_image.h"
#include "daemon/hostctx/symbolizer.h"

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
    if (const auto* mmap = std::get_if<hostctx::MmapRecord>(&*parsed)) {
      if (mmap->path.empty() || mmap->path.size() > hostctx::kMaxMmapPathBytes ||
          mmap->path.find('\0') != std::string::npos || mmap->path.size() > record.size()) {
        std::abort();
      }
      if (mmap->length == 0 || mmap->start + mmap->length < mmap->start) std::abort();
    }
    if (const auto* exec = std::get_if<hostctx::ExecRecord>(&*parsed)) {
      if (exec->comm.size() > hostctx::kMaxCommBytes ||
          exec->comm.find('\0') != std::string::npos) {
        std::abort();
      }
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

// The maps as a process's snapshot, then again after an exec with the
// same lines as its new mappings: no file is opened (the image has no
// root), the [vdso] and the mappings' places still name frames.
void ReplayMaps(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);  // NOLINT
  std::vector<hostctx::Mapping> mappings = hostctx::ParseMaps(text);
  for (const hostctx::Mapping& mapping : mappings) {
    if (mapping.end <= mapping.start || mapping.path.empty()) std::abort();
    if (mapping.path[0] != '/' && mapping.path != "[vdso]") std::abort();
  }
  hostctx::ProcessImage image;
  image.changes.push_back({.time_ns = 10, .exec = false, .mappings = mappings});
  image.changes.push_back({.time_ns = 20, .exec = true, .mappings = {}});
  for (const hostctx::Mapping& mapping : mappings) {
    image.changes.push_back({.time_ns = 30, .exec = false, .mappings = {mapping}});
  }
  absl::flat_hash_map<pid_t, hostctx::ProcessImage> images;
  images.emplace(1, std::move(image));
  hostctx::Symbolizer symbolizer("/nonexistent", std::move(images));
  for (uint64_t time : {uint64_t{0}, uint64_t{25}}) {
    const uint32_t space = symbolizer.AddressSpaceAt(1, time);
    if (space != (time < 20 ? 0u : 1u)) std::abort();
    for (const hostctx::Mapping& mapping : mappings) {
      const hostctx::Frame frame = symbolizer.Symbolize(1, space, mapping.start, false);
      if (!frame.function.empty() && frame.module.empty()) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 4 == 3) {
    ReplayMaps(data + 1, size - 1);
  } else if (data[0] % 2 == 0) {
    DrainAsRing(data + 1, size - 1);
  } else {
    ParsePerfMap(data + 1, size - 1);
  }
  return 0;
}
