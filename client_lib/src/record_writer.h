// Builds a capture payload in the "GPCR" record format of
// proto/gpuctl/v1/records.h, with the encoder of record_codec.h, so the
// output is the same on any host.
//
// Not thread-safe: one writer is filled by the agent thread at collection.
#ifndef GPUCTL_CLIENT_LIB_SRC_RECORD_WRITER_H_
#define GPUCTL_CLIENT_LIB_SRC_RECORD_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gpuctl/v1/record_codec.h"

namespace gpuctl::client {

// The GPU records the capture sources fill (records.h).
using records::ApiCallRecord;
using records::CaptureInfoRecord;
using records::DeviceInfoRecord;
using records::ExternalCorrelationRecord;
using records::KernelRecord;
using records::MarkerRecord;
using records::MemcpyRecord;
using records::MemoryPoolRecord;
using records::MemoryRecord;
using records::MemsetRecord;
using records::OverheadRecord;
using records::SyncRecord;

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

  // Any record of records.h. String fields are indexes returned by this
  // writer's InternString.
  template <typename R>
  void Add(const R& r) {
    const size_t at = events_.size();
    events_.resize(at + records::Layout<R>::kSize);
    records::EncodeRecord(r, Bytes(events_, at));
    ++event_count_;
  }

  uint64_t event_count() const { return event_count_; }
  // Bytes the finished payload will have.
  uint64_t PayloadSize() const;

  // Returns header + events + strings. The writer is left empty.
  std::string Finish(const PayloadHeaderInfo& info);

 private:
  static uint8_t* Bytes(std::string& s, size_t at) {
    return reinterpret_cast<uint8_t*>(s.data()) + at;  // NOLINT: our own buffer
  }

  std::string events_;
  std::string strings_;
  std::unordered_map<std::string, uint32_t> string_index_;
  uint64_t event_count_ = 0;
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_RECORD_WRITER_H_
