// The device memory part of the Chrome trace (the "memory" activity): per
// device a counter track of the bytes allocated since the window's start,
// and an instant per allocation, release and memory pool operation on the
// device's "device memory" row. docs/trace-format.md lists every field.
#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "daemon/convert/chrome_trace_internal.h"
#include "daemon/convert/cupti_names.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::daemon::chrome_internal {
namespace {

namespace rec = ::gpuctl::records;

// The counter cannot leave this range: each record's bytes are at most
// 2^40 (record_reader_memory.cc), so clamping keeps every step exact
// unless a payload claims more than 2^62 bytes in total.
constexpr int64_t kCounterLimit = int64_t{1} << 62;

int64_t AddClamped(int64_t counter, int64_t delta) {
  return std::clamp(counter + delta, -kCounterLimit, kCounterLimit);
}

absl::string_view PoolOperationName(uint8_t op) {
  switch (op) {
    case rec::kPoolOpCreated:
      return "Memory Pool Created";
    case rec::kPoolOpDestroyed:
      return "Memory Pool Destroyed";
    default:
      return "Memory Pool Trimmed";
  }
}

absl::string_view PoolTypeName(uint8_t type) { return type == 2 ? "imported" : "local"; }

class MemoryEventWriter {
 public:
  MemoryEventWriter(const DecodedRecords& r, EventWriter* events)
      : r_(r), ev_(events), out_(events->out()) {}

  void Write() {
    // Records come in CUPTI's buffer order; the counter needs time order.
    std::vector<const MemoryRecord*> ops;
    ops.reserve(r_.memory_ops.size());
    for (const MemoryRecord& m : r_.memory_ops) ops.push_back(&m);
    std::stable_sort(ops.begin(), ops.end(), [](const MemoryRecord* a, const MemoryRecord* b) {
      return a->ts_ns < b->ts_ns;
    });
    std::map<uint32_t, int64_t> first_ts;
    for (const MemoryRecord* m : ops) first_ts.emplace(m->device_id, m->ts_ns);
    for (const MemoryPoolRecord& p : r_.memory_pools) first_ts.emplace(p.device_id, p.ts_ns);
    for (const auto& [device, ts] : first_ts) {
      ev_->Meta("thread_name", device, kMemoryRowTid, "name", "device memory");
      ev_->MetaIndex("thread_sort_index", device, kMemoryRowTid, kMemoryRowTid);
    }
    // Every device's track starts at 0 at the window's start: what was
    // allocated before is unknown.
    for (const auto& [device, ts] : first_ts) {
      Counter(device, std::min(ts, r_.window_start_ns), 0);
    }
    for (const MemoryRecord* m : ops) WriteOp(*m);
    for (const MemoryPoolRecord& p : r_.memory_pools) WritePool(p);
  }

 private:
  struct Live {
    uint64_t bytes;
  };

  void Counter(uint32_t device, int64_t ts_ns, int64_t bytes) {
    ev_->Counter("gpu_memory", absl::StrCat("Device memory allocated (GPU ", device, ")"), device,
                 ts_ns);
    absl::StrAppend(out_, ", \"args\": {\"bytes\": ", bytes, "}}");
  }

  // The bytes a record adds to its device's counter: a release frees what
  // its allocation in the window took, or what it says when the allocation
  // came before the window.
  int64_t Delta(const MemoryRecord& m) {
    auto& live = live_[m.device_id];
    if (m.operation == rec::kMemoryOpAllocation) {
      live[m.address] = Live{m.bytes};
      return static_cast<int64_t>(m.bytes);
    }
    auto it = live.find(m.address);
    uint64_t freed = m.bytes;
    if (it != live.end()) {
      freed = it->second.bytes;
      live.erase(it);
    }
    return -static_cast<int64_t>(freed);
  }

  void WriteOp(const MemoryRecord& m) {
    const int64_t delta = Delta(m);
    int64_t& counter = allocated_[m.device_id];
    counter = AddClamped(counter, delta);
    const bool alloc = m.operation == rec::kMemoryOpAllocation;
    ev_->Instant("gpu_memory", alloc ? "Memory Allocation" : "Memory Release", m.device_id,
                 kMemoryRowTid, m.ts_ns);
    absl::StrAppend(out_, ", \"args\": {\"device\": ", m.device_id, ", \"context\": ", m.context_id,
                    ", \"stream\": ", static_cast<int32_t>(m.stream_id),
                    ", \"correlation\": ", m.correlation_id, ", \"address\": ", m.address,
                    ", \"bytes\": ", delta < 0 ? -delta : delta, ", \"memory kind\": \"",
                    MemoryKindName(m.memory_kind),
                    "\", \"async\": ", (m.flags & rec::kMemoryFlagAsync) ? "true" : "false");
    if (m.pool_type != 0) {
      absl::StrAppend(out_, ", \"pool type\": \"", PoolTypeName(m.pool_type),
                      "\", \"pool address\": ", m.pool_address, ", \"pool size\": ", m.pool_size,
                      ", \"pool utilized\": ", m.pool_utilized,
                      ", \"pool release threshold\": ", m.pool_release_threshold);
    }
    absl::StrAppend(out_, ", \"allocated\": ", counter, "}}");
    Counter(m.device_id, m.ts_ns, counter);
  }

  void WritePool(const MemoryPoolRecord& p) {
    ev_->Instant("gpu_memory", PoolOperationName(p.operation), p.device_id, kMemoryRowTid, p.ts_ns);
    absl::StrAppend(out_, ", \"args\": {\"device\": ", p.device_id,
                    ", \"correlation\": ", p.correlation_id, ", \"pool type\": \"",
                    PoolTypeName(p.pool_type), "\", \"address\": ", p.address,
                    ", \"size\": ", p.size, ", \"utilized\": ", p.utilized,
                    ", \"release threshold\": ", p.release_threshold);
    if (p.operation == rec::kPoolOpTrimmed) {
      absl::StrAppend(out_, ", \"min bytes to keep\": ", p.min_bytes_to_keep);
    }
    absl::StrAppend(
        out_, ", \"managed\": ", (p.flags & rec::kMemoryPoolFlagManaged) ? "true" : "false", "}}");
  }

  const DecodedRecords& r_;
  EventWriter* ev_;
  std::string* out_;
  // device -> address -> the allocation made in the window.
  absl::flat_hash_map<uint32_t, absl::flat_hash_map<uint64_t, Live>> live_;
  // device -> bytes allocated since the window's start.
  absl::flat_hash_map<uint32_t, int64_t> allocated_;
};

}  // namespace

void WriteMemoryEvents(const DecodedRecords& records, EventWriter* events) {
  if (records.memory_ops.empty() && records.memory_pools.empty()) return;
  MemoryEventWriter(records, events).Write();
}

}  // namespace gpuctl::daemon::chrome_internal
