#ifndef GPUCTL_DAEMON_CONVERT_CHROME_TRACE_H_
#define GPUCTL_DAEMON_CONVERT_CHROME_TRACE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/convert/record_reader.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// Receives the JSON text in pieces.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
};

class StringSink final : public ByteSink {
 public:
  absl::Status Append(absl::string_view data) override {
    out_.append(data.data(), data.size());
    return absl::OkStatus();
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

struct ChromeTraceMeta {
  std::string trace_id;
  std::string host;
  // Stored file name, also used as "traceName".
  std::string file_name;
  v1::ProcessInfo process;
  // The rank written to "distributedInfo" when process.rank() is unknown
  // (-1): a number no other process of the trace holds, chosen by the
  // caller (UnknownRankSlots); the pid when negative.
  int32_t analysis_rank = -1;
  // Events from beyond the process's records (the daemon's host context),
  // written after them: called once with the file's baseTimeNanoseconds
  // and the window, handing `add` one complete JSON object per event.
  using AddEvent = absl::FunctionRef<void(absl::string_view)>;
  std::function<void(int64_t base_ns, int64_t window_start_ns, int64_t window_end_ns, AddEvent add)>
      extra_events;
};

// Told about the trace's events as the converter writes them, so that
// numbers can be computed at ingest without reading the file back (the
// daemon's core plugs in the analysis's summary). Called on the converting
// thread, in the converter's order, with the records' CLOCK_REALTIME ns;
// what is passed lives only for the call.
class TraceEventObserver {
 public:
  enum class GpuOpType : uint8_t { kKernel, kMemcpy, kMemset };
  virtual ~TraceEventObserver() = default;
  // The capture window; first.
  virtual void OnWindow(int64_t start_ns, int64_t end_ns) = 0;
  // A kernel, copy or memset on its GPU row. `name_key` (the string table
  // index) is equal for equal kernel names within one trace; copies and
  // memsets pass 0 and no name.
  virtual void OnGpuOp(GpuOpType type, uint32_t device, uint32_t stream, uint32_t name_key,
                       absl::string_view name, int64_t start_ns, int64_t end_ns) = 0;
  // A "user_annotation" duration event: a range, a ProfilerStep#N step
  // (ending where the file's does), an NVTX range.
  virtual void OnAnnotation(absl::string_view name, uint32_t tid, int64_t start_ns,
                            int64_t end_ns) = 0;
};

// The "baseTimeNanoseconds" of a trace: its window start rounded down to a
// whole second (floor, also for negative values). Event "ts" values are
// microseconds (ns fraction) relative to it.
int64_t ChromeTraceBaseNanos(int64_t window_start_ns);

// Writes validated records as Chrome trace-event JSON in kineto's layout
// (every field: docs/trace-format.md):
//   {"schemaVersion": 1, "deviceProperties": [...],
//    "distributedInfo": {"backend": "", "rank": R[, "world_size": W]},
//    "gpuctl": {...}, "traceEvents": [...], "traceName": ...,
//    "displayTimeUnit": "ms", "baseTimeNanoseconds": B}
// "rank": is followed by a space (Holistic Trace Analysis matches
// "rank":\s+(\d+)), and keys a directory's files by it, so every file needs
// a distinct one: an unknown rank (-1) is written as meta.analysis_rank.
// "world_size" is left out there when unknown; "gpuctl" keeps the true
// values (-1 for unknown).
// Ranges become "X" events of category "user_annotation"; step marks become
// "ProfilerStep#N" user annotations lasting until the thread's next step
// mark (the last one until the window end). GPU records become kineto's
// kernel / gpu_memcpy / gpu_memset / cuda_sync events on rows pid = device,
// tid = stream, CUDA API calls cuda_runtime / cuda_driver events on the
// calling thread, with "ac2g" flows between a launch and its GPU ops and
// "External id" linking both to the gpuctl range that launched them.
// Strings that are not UTF-8 are repaired with U+FFFD.
absl::Status WriteChromeTrace(const DecodedRecords& records, const ChromeTraceMeta& meta,
                              ByteSink* sink);
// The same, telling `observer` (when not null) about the events written.
absl::Status WriteChromeTrace(const DecodedRecords& records, const ChromeTraceMeta& meta,
                              ByteSink* sink, TraceEventObserver* observer);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONVERT_CHROME_TRACE_H_
