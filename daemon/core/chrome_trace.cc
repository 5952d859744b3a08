#include "daemon/core/chrome_trace.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/json_writer.h"

namespace gpuctl::daemon {
namespace {

constexpr size_t kFlushBytes = 256 * 1024;
constexpr int64_t kNanosPerSecond = 1000000000;

// Buffers JSON text and hands it to the sink in large pieces.
class Writer {
 public:
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

class TraceBuilder {
 public:
  TraceBuilder(const DecodedRecords& records, const ChromeTraceMeta& meta, Writer* w)
      : r_(records),
        meta_(meta),
        w_(w),
        out_(w->buf()),
        pid_(meta.process.pid()),
        base_(ChromeTraceBaseNanos(records.window_start_ns)) {}

  void Build() {
    WriteHeader();
    absl::StrAppend(out_, "  \"traceEvents\": [");
    WriteMetadata();
    WriteWindow();
    for (const RangeRecord& range : r_.ranges) WriteRange(range);
    WriteSteps();
    absl::StrAppend(out_, "\n  ],\n  \"traceName\": ");
    AppendJsonString(out_, meta_.file_name);
    absl::StrAppend(out_, ",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ", base_,
                    "\n}\n");
  }

 private:
  void WriteHeader() {
    bool rank_known = meta_.process.rank() >= 0;
    int rank = rank_known ? meta_.process.rank() : 0;
    int world = rank_known && meta_.process.world_size() > 0 ? meta_.process.world_size() : 1;
    absl::StrAppend(out_, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n",
                    "  \"distributedInfo\": {\"backend\": \"\", \"rank\": ", rank,
                    ", \"world_size\": ", world, "},\n  \"gpuctl\": {\"trace_id\": ");
    AppendJsonString(out_, meta_.trace_id);
    absl::StrAppend(out_, ", \"host\": ");
    AppendJsonString(out_, meta_.host);
    absl::StrAppend(out_, ", \"pid\": ", pid_, ", \"job_id\": ");
    AppendJsonString(out_, meta_.process.job_id());
    absl::StrAppend(out_, ", \"rank\": ", meta_.process.rank(),
                    ", \"world_size\": ", meta_.process.world_size(), ", \"library_version\": ");
    AppendJsonString(out_, meta_.process.library_version());
    absl::StrAppend(out_, ", \"dropped_events\": ", r_.dropped_events,
                    ", \"window_start_ns\": ", r_.window_start_ns,
                    ", \"window_end_ns\": ", r_.window_end_ns, "},\n");
  }

  void BeginEvent() {
    w_->MaybeFlush();
    absl::StrAppend(out_, first_event_ ? "\n    {" : ",\n    {");
    first_event_ = false;
  }

  void Meta(absl::string_view name, uint32_t tid, absl::string_view arg_key,
            absl::string_view string_value) {
    BeginEvent();
    absl::StrAppend(out_, "\"name\": \"", name, "\", \"ph\": \"M\", \"ts\": ");
    AppendMicrosFromNanos(out_, r_.window_start_ns - base_);
    absl::StrAppend(out_, ", \"pid\": ", pid_, ", \"tid\": ", tid, ", \"args\": {\"", arg_key,
                    "\": ");
    AppendJsonString(out_, string_value);
    absl::StrAppend(out_, "}}");
  }
  void MetaIndex(absl::string_view name, uint32_t tid, int64_t index) {
    BeginEvent();
    absl::StrAppend(out_, "\"name\": \"", name, "\", \"ph\": \"M\", \"ts\": ");
    AppendMicrosFromNanos(out_, r_.window_start_ns - base_);
    absl::StrAppend(out_, ", \"pid\": ", pid_, ", \"tid\": ", tid,
                    ", \"args\": {\"sort_index\": ", index, "}}");
  }

  std::string ProcessName() const {
    if (meta_.process.cmdline_size() > 0 && !meta_.process.cmdline(0).empty()) {
      absl::string_view exe = meta_.process.cmdline(0);
      size_t slash = exe.rfind('/');
      if (slash != absl::string_view::npos && slash + 1 < exe.size()) exe.remove_prefix(slash + 1);
      return std::string(exe);
    }
    return absl::StrCat("pid ", pid_);
  }

  void WriteMetadata() {
    Meta("process_name", 0, "name", ProcessName());
    std::string labels = meta_.process.rank() >= 0 ? absl::StrCat("job ", meta_.process.job_id(),
                                                                  ", rank ", meta_.process.rank())
                                                   : absl::StrCat("job ", meta_.process.job_id());
    Meta("process_labels", 0, "labels", labels);
    MetaIndex("process_sort_index", 0, pid_);
    absl::flat_hash_map<uint32_t, absl::string_view> names;
    absl::btree_set<uint32_t> tids;
    for (const ThreadNameRecord& t : r_.thread_names) {
      names[t.tid] = r_.strings[t.name];
      tids.insert(t.tid);
    }
    for (const RangeRecord& range : r_.ranges) tids.insert(range.tid);
    for (const StepRecord& step : r_.steps) tids.insert(step.tid);
    for (uint32_t tid : tids) {
      auto it = names.find(tid);
      Meta("thread_name", tid, "name",
           it != names.end() ? std::string(it->second) : absl::StrCat("thread ", tid));
      MetaIndex("thread_sort_index", tid, tid);
    }
  }

  void Complete(absl::string_view cat, absl::string_view name, uint32_t tid, int64_t start_ns,
                int64_t end_ns) {
    BeginEvent();
    absl::StrAppend(out_, "\"ph\": \"X\", \"cat\": \"", cat, "\", \"name\": ");
    AppendJsonString(out_, name);
    absl::StrAppend(out_, ", \"pid\": ", pid_, ", \"tid\": ", tid, ", \"ts\": ");
    AppendMicrosFromNanos(out_, start_ns - base_);
    absl::StrAppend(out_, ", \"dur\": ");
    AppendMicrosFromNanos(out_, end_ns - start_ns);
  }

  void WriteWindow() {
    Complete("Trace", absl::StrCat("gpuctl capture ", meta_.trace_id), 0, r_.window_start_ns,
             r_.window_end_ns);
    absl::StrAppend(out_, ", \"args\": {\"Op count\": ", r_.ranges.size(), "}}");
  }

  void WriteRange(const RangeRecord& range) {
    Complete("user_annotation", r_.strings[range.name], range.tid, range.start_ns, range.end_ns);
    absl::StrAppend(out_, ", \"args\": {\"correlation\": ", range.range_id,
                    ", \"depth\": ", range.depth, "}}");
  }

  void WriteSteps() {
    std::map<uint32_t, std::vector<const StepRecord*>> by_tid;
    for (const StepRecord& step : r_.steps) by_tid[step.tid].push_back(&step);
    for (auto& [tid, steps] : by_tid) {
      std::stable_sort(steps.begin(), steps.end(), [](const StepRecord* a, const StepRecord* b) {
        return a->ts_ns < b->ts_ns;
      });
      for (size_t i = 0; i < steps.size(); ++i) {
        int64_t start = steps[i]->ts_ns;
        int64_t end = i + 1 < steps.size() ? steps[i + 1]->ts_ns : r_.window_end_ns;
        if (end < start) end = start;
        Complete("user_annotation", absl::StrCat("ProfilerStep#", steps[i]->step), tid, start, end);
        absl::StrAppend(out_, ", \"args\": {\"step\": ", steps[i]->step, "}}");
      }
    }
  }

  const DecodedRecords& r_;
  const ChromeTraceMeta& meta_;
  Writer* w_;
  std::string* out_;
  int32_t pid_;
  int64_t base_;
  bool first_event_ = true;
};

}  // namespace

int64_t ChromeTraceBaseNanos(int64_t window_start_ns) {
  int64_t q = window_start_ns / kNanosPerSecond;
  if (window_start_ns % kNanosPerSecond < 0) --q;
  return q * kNanosPerSecond;
}

absl::Status WriteChromeTrace(const DecodedRecords& records, const ChromeTraceMeta& meta,
                              ByteSink* sink) {
  Writer writer(sink);
  TraceBuilder(records, meta, &writer).Build();
  return writer.Finish();
}

}  // namespace gpuctl::daemon
