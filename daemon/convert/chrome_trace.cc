#include "daemon/convert/chrome_trace.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "daemon/convert/chrome_trace_internal.h"
#include "daemon/convert/json_writer.h"

namespace gpuctl::daemon {
namespace {

constexpr int64_t kNanosPerSecond = 1000000000;

using chrome_internal::EventWriter;
using chrome_internal::Writer;

class TraceBuilder {
 public:
  TraceBuilder(const DecodedRecords& records, const ChromeTraceMeta& meta, Writer* w,
               TraceEventObserver* observer)
      : r_(records),
        meta_(meta),
        out_(w->buf()),
        pid_(meta.process.pid()),
        base_(ChromeTraceBaseNanos(records.window_start_ns)),
        events_(w, base_, records.window_start_ns, observer),
        observer_(observer) {}

  void Build() {
    WriteHeader();
    absl::StrAppend(out_, "  \"traceEvents\": [");
    WriteMetadata();
    WriteWindow();
    for (const RangeRecord& range : r_.ranges) WriteRange(range);
    WriteSteps();
    chrome_internal::WriteGpuEvents(r_, pid_, &events_);
    if (meta_.extra_events) {
      meta_.extra_events(base_, r_.window_start_ns, r_.window_end_ns,
                         [this](absl::string_view event) { events_.Raw(event); });
    }
    absl::StrAppend(out_, "\n  ],\n  \"traceName\": ");
    AppendJsonString(out_, meta_.file_name);
    absl::StrAppend(out_, ",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ", base_,
                    "\n}\n");
  }

 private:
  void WriteHeader() {
    const int32_t rank = meta_.process.rank() >= 0  ? meta_.process.rank()
                         : meta_.analysis_rank >= 0 ? meta_.analysis_rank
                                                    : pid_;
    absl::StrAppend(out_, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
    chrome_internal::AppendDeviceProperties(r_, out_);
    absl::StrAppend(out_, "],\n  \"distributedInfo\": {\"backend\": \"\", \"rank\": ", rank);
    if (meta_.process.world_size() > 0) {
      absl::StrAppend(out_, ", \"world_size\": ", meta_.process.world_size());
    }
    absl::StrAppend(out_, "},\n  \"gpuctl\": {\"trace_id\": ");
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
                    ", \"window_end_ns\": ", r_.window_end_ns);
    chrome_internal::AppendCaptureInfo(r_, out_);
    absl::StrAppend(out_, "},\n");
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
    events_.Meta("process_name", pid_, 0, "name", ProcessName());
    std::string labels = meta_.process.rank() >= 0 ? absl::StrCat("job ", meta_.process.job_id(),
                                                                  ", rank ", meta_.process.rank())
                                                   : absl::StrCat("job ", meta_.process.job_id());
    events_.Meta("process_labels", pid_, 0, "labels", labels);
    events_.MetaIndex("process_sort_index", pid_, 0, pid_);
    absl::flat_hash_map<uint32_t, absl::string_view> names;
    absl::btree_set<uint32_t> tids;
    for (const ThreadNameRecord& t : r_.thread_names) {
      names[t.tid] = r_.strings[t.name];
      tids.insert(t.tid);
    }
    for (const RangeRecord& range : r_.ranges) tids.insert(range.tid);
    for (const StepRecord& step : r_.steps) tids.insert(step.tid);
    for (const ApiCallRecord& call : r_.api_calls) tids.insert(call.tid);
    for (const MarkerRecord& marker : r_.markers) tids.insert(marker.tid);
    for (uint32_t tid : tids) {
      auto it = names.find(tid);
      events_.Meta("thread_name", pid_, tid, "name",
                   it != names.end() ? std::string(it->second) : absl::StrCat("thread ", tid));
      events_.MetaIndex("thread_sort_index", pid_, tid, tid);
    }
  }

  void WriteWindow() {
    if (observer_ != nullptr) observer_->OnWindow(r_.window_start_ns, r_.window_end_ns);
    events_.Complete("Trace", absl::StrCat("gpuctl capture ", meta_.trace_id), pid_, 0,
                     r_.window_start_ns, r_.window_end_ns);
    absl::StrAppend(out_, ", \"args\": {\"Op count\": ", r_.ranges.size(), "}}");
  }

  void WriteRange(const RangeRecord& range) {
    events_.Complete("user_annotation", r_.strings[range.name], pid_, range.tid, range.start_ns,
                     range.end_ns);
    if (observer_ != nullptr) {
      observer_->OnAnnotation(r_.strings[range.name], range.tid, range.start_ns, range.end_ns);
    }
    // "External id" links the range to the GPU work launched inside it
    // (kExternalCorrelation), as kineto links a CPU op to its kernels. No
    // "correlation": consumers join that key as a CUDA correlation id
    // (kineto's user_annotation and cpu_op events have none).
    absl::StrAppend(out_, ", \"args\": {\"External id\": ", range.range_id,
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
        const std::string name = absl::StrCat("ProfilerStep#", steps[i]->step);
        events_.Complete("user_annotation", name, pid_, tid, start, end);
        if (observer_ != nullptr) observer_->OnAnnotation(name, tid, start, end);
        absl::StrAppend(out_, ", \"args\": {\"step\": ", steps[i]->step, "}}");
      }
    }
  }

  const DecodedRecords& r_;
  const ChromeTraceMeta& meta_;
  std::string* out_;
  int32_t pid_;
  int64_t base_;
  EventWriter events_;
  TraceEventObserver* observer_;
};

}  // namespace

int64_t ChromeTraceBaseNanos(int64_t window_start_ns) {
  int64_t q = window_start_ns / kNanosPerSecond;
  if (window_start_ns % kNanosPerSecond < 0) --q;
  return q * kNanosPerSecond;
}

absl::Status WriteChromeTrace(const DecodedRecords& records, const ChromeTraceMeta& meta,
                              ByteSink* sink) {
  return WriteChromeTrace(records, meta, sink, nullptr);
}

absl::Status WriteChromeTrace(const DecodedRecords& records, const ChromeTraceMeta& meta,
                              ByteSink* sink, TraceEventObserver* observer) {
  Writer writer(sink);
  TraceBuilder(records, meta, &writer, observer).Build();
  return writer.Finish();
}

}  // namespace gpuctl::daemon
