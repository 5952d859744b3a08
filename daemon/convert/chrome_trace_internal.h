// Internal to the Chrome trace converter: the buffered writer and the
// trace-event primitives shared by the host and GPU parts. Not a public API.
#ifndef GPUCTL_DAEMON_CONVERT_CHROME_TRACE_INTERNAL_H_
#define GPUCTL_DAEMON_CONVERT_CHROME_TRACE_INTERNAL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/convert/chrome_trace.h"
#include "daemon/convert/json_writer.h"
#include "daemon/convert/record_reader.h"

namespace gpuctl::daemon::chrome_internal {

// process_sort_index of GPU rows: kineto's kExceedMaxPid + device id, so
// devices sort after every host process.
inline constexpr int64_t kGpuSortIndexBase = 5000000;
// Kineto's row for CUPTI overhead events.
inline constexpr int64_t kOverheadPid = -1;
inline constexpr int64_t kOverheadSortIndex = 0x100000;
// The tid of a GPU's "device memory" row (allocations, releases, pools):
// past kineto's stream-synchronize rows (stream + 1000000).
inline constexpr int64_t kMemoryRowTid = 2000000;

// Buffers JSON text and hands it to the sink in large pieces.
class Writer {
 public:
  static constexpr size_t kFlushBytes = size_t{256} * 1024;
  explicit Writer(ByteSink* sink) : sink_(sink) { buf_.reserve(kFlushBytes + 4096); }
  std::string* buf() { return &buf_; }
  // Call between events; keeps the first error.
  void MaybeFlush() {
    if (buf_.size() >= kFlushBytes) Flush();
  }
  absl::Status Finish() {
    Flush();
    return status_;
  }

 private:
  void Flush() {
    if (status_.ok() && !buf_.empty()) status_ = sink_->Append(buf_);
    buf_.clear();
  }
  ByteSink* sink_;
  std::string buf_;
  absl::Status status_;
};

// Writes the elements of "traceEvents". Times are CLOCK_REALTIME ns and
// come out as µs (ns fraction) relative to `base_ns`. An event is opened by
// one of the event methods and closed by the caller with "}" (after any
// ", \"args\": {...}").
class EventWriter {
 public:
  EventWriter(Writer* w, int64_t base_ns, int64_t meta_ts_ns, TraceEventObserver* observer)
      : w_(w), out_(w->buf()), base_(base_ns), meta_ts_(meta_ts_ns), observer_(observer) {}

  std::string* out() { return out_; }
  // Told about the events the writers write; null when none.
  TraceEventObserver* observer() const { return observer_; }

  // {"ph": "X", "cat": .., "name": .., "pid": .., "tid": .., "ts": .., "dur": ..
  void Complete(absl::string_view cat, absl::string_view name, int64_t pid, int64_t tid,
                int64_t start_ns, int64_t end_ns) {
    Begin();
    absl::StrAppend(out_, "\"ph\": \"X\", \"cat\": \"", cat, "\", \"name\": ");
    AppendJsonString(out_, name);
    absl::StrAppend(out_, ", \"pid\": ", pid, ", \"tid\": ", tid, ", \"ts\": ");
    AppendMicrosFromNanos(out_, start_ns - base_);
    absl::StrAppend(out_, ", \"dur\": ");
    AppendMicrosFromNanos(out_, end_ns - start_ns);
  }

  // A thread-scoped instant: {"ph": "i", "s": "t", ...
  void Instant(absl::string_view cat, absl::string_view name, int64_t pid, int64_t tid,
               int64_t ts_ns) {
    Begin();
    absl::StrAppend(out_, "\"ph\": \"i\", \"s\": \"t\", \"cat\": \"", cat, "\", \"name\": ");
    AppendJsonString(out_, name);
    absl::StrAppend(out_, ", \"pid\": ", pid, ", \"tid\": ", tid, ", \"ts\": ");
    AppendMicrosFromNanos(out_, ts_ns - base_);
  }

  // A process-scoped counter sample: {"ph": "C", ...; its "args" hold the
  // series' values.
  void Counter(absl::string_view cat, absl::string_view name, int64_t pid, int64_t ts_ns) {
    Begin();
    absl::StrAppend(out_, "\"ph\": \"C\", \"cat\": \"", cat, "\", \"name\": ");
    AppendJsonString(out_, name);
    absl::StrAppend(out_, ", \"pid\": ", pid, ", \"tid\": 0, \"ts\": ");
    AppendMicrosFromNanos(out_, ts_ns - base_);
  }

  // A complete event written elsewhere, as one JSON object.
  void Raw(absl::string_view object) {
    w_->MaybeFlush();
    absl::StrAppend(out_, first_ ? "\n    " : ",\n    ", object);
    first_ = false;
  }

  // A complete metadata event with one string argument.
  void Meta(absl::string_view name, int64_t pid, int64_t tid, absl::string_view arg_key,
            absl::string_view value) {
    BeginMeta(name, pid, tid);
    absl::StrAppend(out_, ", \"args\": {\"", arg_key, "\": ");
    AppendJsonString(out_, value);
    absl::StrAppend(out_, "}}");
  }
  // A complete *_sort_index metadata event.
  void MetaIndex(absl::string_view name, int64_t pid, int64_t tid, int64_t index) {
    BeginMeta(name, pid, tid);
    absl::StrAppend(out_, ", \"args\": {\"sort_index\": ", index, "}}");
  }

  // A complete "ac2g" flow event as kineto writes it: phase 's' at the
  // launching call, 'f' (binding to the enclosing slice) at the GPU op.
  void Flow(char phase, uint64_t id, int64_t pid, int64_t tid, int64_t ts_ns) {
    Begin();
    absl::StrAppend(out_, "\"ph\": \"", absl::string_view(&phase, 1), "\", \"id\": ", id,
                    ", \"pid\": ", pid, ", \"tid\": ", tid, ", \"ts\": ");
    AppendMicrosFromNanos(out_, ts_ns - base_);
    absl::StrAppend(out_, ", \"cat\": \"ac2g\", \"name\": \"ac2g\"",
                    phase == 'f' ? ", \"bp\": \"e\"}" : "}");
  }

 private:
  void Begin() {
    w_->MaybeFlush();
    absl::StrAppend(out_, first_ ? "\n    {" : ",\n    {");
    first_ = false;
  }
  void BeginMeta(absl::string_view name, int64_t pid, int64_t tid) {
    Begin();
    absl::StrAppend(out_, "\"name\": \"", name, "\", \"ph\": \"M\", \"ts\": ");
    AppendMicrosFromNanos(out_, meta_ts_ - base_);
    absl::StrAppend(out_, ", \"pid\": ", pid, ", \"tid\": ", tid);
  }

  Writer* w_;
  std::string* out_;
  int64_t base_;
  int64_t meta_ts_;
  TraceEventObserver* observer_;
  bool first_ = true;
};

// Appends the elements of "deviceProperties" (without brackets), one per
// kDeviceInfo record, with kineto's keys.
void AppendDeviceProperties(const DecodedRecords& records, std::string* out);

// Appends the capture-info members of the "gpuctl" object, each preceded by
// ", ": host_only, host_only_reason, activities, cupti_version,
// cupti_path, cupti_failed, cupti_dropped_records, dropped_at_cap.
void AppendCaptureInfo(const DecodedRecords& records, std::string* out);

// Writes every GPU-side event: metadata of the GPU rows, CUDA API calls,
// kernels, copies, memsets, synchronizations, NVTX markers, CUPTI overhead,
// and the ac2g flows between launches and GPU ops. `pid` is the host
// process's row.
void WriteGpuEvents(const DecodedRecords& records, int64_t pid, EventWriter* events);

// Writes the device memory events (chrome_trace_memory.cc): per device the
// "Device memory allocated (GPU N)" counter, from 0 at the window's start,
// and an instant per allocation, release and memory pool operation.
void WriteMemoryEvents(const DecodedRecords& records, EventWriter* events);

}  // namespace gpuctl::daemon::chrome_internal

#endif  // GPUCTL_DAEMON_CONVERT_CHROME_TRACE_INTERNAL_H_
