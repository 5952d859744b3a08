// Builds a capture payload in the "GPCR" record format of
// proto/gpuctl/v1/records.h. Every integer is stored with explicit
// little-endian byte writes, so the output is the same on any host.
//
// Not thread-safe: one writer is filled by the agent thread at collection.
#ifndef GPUCTL_CLIENT_LIB_SRC_RECORD_WRITER_H_
#define GPUCTL_CLIENT_LIB_SRC_RECORD_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "client_lib/src/gpu_records.h"

namespace gpuctl::client {

struct PayloadHeaderInfo {
  uint64_t dropped_events = 0;
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
  int32_t pid = 0;
};

class RecordWriter {
 public:
  RecordWriter() = default;
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Returns the index of `s` in the string table, adding it on first use.
  // Strings longer than records::kMaxStringLength are truncated to it.
  uint32_t InternString(std::string_view s);

  void AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns, uint32_t name, uint32_t depth,
                uint64_t range_id);
  void AddStep(uint32_t tid, int64_t ts_ns, uint64_t step);
  void AddThreadName(uint32_t tid, uint32_t name);

  // GPU kinds (record_writer_gpu.cc). String fields are indexes returned by
  // this writer's InternString.
  void Add(const KernelRecord& r);
  void Add(const MemcpyRecord& r);
  void Add(const MemsetRecord& r);
  void Add(const ApiCallRecord& r);
  void Add(const SyncRecord& r);
  void Add(const MarkerRecord& r);
  void Add(const OverheadRecord& r);
  void Add(const ExternalCorrelationRecord& r);
  void Add(const DeviceInfoRecord& r);
  void Add(const CaptureInfoRecord& r);

  uint64_t event_count() const { return event_count_; }
  // Bytes the finished payload will have.
  uint64_t PayloadSize() const;

  // Returns header + events + strings. The writer is left empty.
  std::string Finish(const PayloadHeaderInfo& info);

 private:
  // Starts a record and counts it; the caller appends exactly size - 4 bytes.
  void BeginRecord(uint16_t kind, uint16_t size);

  std::string events_;
  std::string strings_;
  std::unordered_map<std::string, uint32_t> string_index_;
  uint64_t event_count_ = 0;
};

// Little-endian stores into a byte string; shared with tests' decoders.
void AppendU16(std::string* out, uint16_t v);
void AppendU32(std::string* out, uint32_t v);
void AppendU64(std::string* out, uint64_t v);
inline void AppendU8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }
inline void AppendI32(std::string* out, int32_t v) { AppendU32(out, static_cast<uint32_t>(v)); }
inline void AppendI64(std::string* out, int64_t v) { AppendU64(out, static_cast<uint64_t>(v)); }

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_RECORD_WRITER_H_
