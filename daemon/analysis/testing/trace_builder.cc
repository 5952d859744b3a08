#include "daemon/analysis/testing/trace_builder.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gpuctl::analysis::testing {
namespace {

std::string Micros(int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const int64_t a = std::llabs(ns);
  return absl::StrFormat("%s%d.%03d", sign, a / 1000, a % 1000);
}

std::string Quote(const std::string& s) { return absl::StrCat("\"", s, "\""); }

}  // namespace

TraceBuilder& TraceBuilder::Gpuctl(const Meta& meta) {
  gpuctl_ = true;
  meta_ = meta;
  return *this;
}

void TraceBuilder::Complete(const std::string& cat, const std::string& name, int64_t pid,
                            int64_t tid, int64_t start, int64_t dur, const std::string& args) {
  events_.push_back(absl::StrCat("{\"ph\": \"X\", \"cat\": ", Quote(cat),
                                 ", \"name\": ", Quote(name), ", \"pid\": ", pid,
                                 ", \"tid\": ", tid, ", \"ts\": ", Micros(start),
                                 ", \"dur\": ", Micros(dur), ", \"args\": {", args, "}}"));
}

TraceBuilder& TraceBuilder::Kernel(const std::string& name, int64_t start, int64_t dur,
                                   uint64_t correlation, int64_t stream, int64_t device) {
  Complete("kernel", name, device, stream, start, dur,
           absl::StrCat("\"device\": ", device, ", \"context\": 1, \"stream\": ", stream,
                        ", \"correlation\": ", correlation, ", \"grid\": [1, 1, 1]"));
  return *this;
}

TraceBuilder& TraceBuilder::Memcpy(const std::string& name, int64_t start, int64_t dur,
                                   uint64_t correlation, uint64_t bytes, int64_t stream) {
  Complete("gpu_memcpy", name, 0, stream, start, dur,
           absl::StrCat("\"device\": 0, \"context\": 1, \"stream\": ", stream,
                        ", \"correlation\": ", correlation, ", \"bytes\": ", bytes));
  return *this;
}

TraceBuilder& TraceBuilder::Memset(int64_t start, int64_t dur, uint64_t correlation, uint64_t bytes,
                                   int64_t stream) {
  Complete("gpu_memset", "Memset (Device)", 0, stream, start, dur,
           absl::StrCat("\"device\": 0, \"context\": 1, \"stream\": ", stream,
                        ", \"correlation\": ", correlation, ", \"bytes\": ", bytes));
  return *this;
}

TraceBuilder& TraceBuilder::Runtime(const std::string& name, int64_t start, int64_t dur,
                                    uint64_t correlation, int64_t tid) {
  Complete("cuda_runtime", name, kPid, tid, start, dur,
           absl::StrCat("\"cbid\": 211, \"correlation\": ", correlation));
  return *this;
}

TraceBuilder& TraceBuilder::Sync(const std::string& name, int64_t start, int64_t dur,
                                 uint64_t correlation, int64_t stream) {
  Complete("cuda_sync", name, 0, stream, start, dur,
           absl::StrCat("\"cuda_sync_kind\": ", Quote(name), ", \"stream\": ", stream,
                        ", \"correlation\": ", correlation, ", \"device\": 0, \"context\": 1"));
  return *this;
}

TraceBuilder& TraceBuilder::Range(const std::string& name, int64_t start, int64_t dur, int64_t tid,
                                  const std::string& cat) {
  Complete(cat, name, kPid, tid, start, dur, "\"External id\": 1");
  return *this;
}

TraceBuilder& TraceBuilder::Step(int64_t number, int64_t start, int64_t dur, int64_t tid) {
  Complete("user_annotation", absl::StrCat("ProfilerStep#", number), kPid, tid, start, dur,
           absl::StrCat("\"step\": ", number));
  return *this;
}

TraceBuilder& TraceBuilder::Raw(const std::string& event_json) {
  events_.push_back(event_json);
  return *this;
}

std::string TraceBuilder::Json() const {
  std::string out = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0}],\n";
  absl::StrAppend(&out, "  \"distributedInfo\": {\"backend\": \"\", \"rank\": ", meta_.rank,
                  "},\n");
  if (gpuctl_) {
    std::vector<std::string> activities;
    for (const std::string& a : meta_.activities) activities.push_back(Quote(a));
    absl::StrAppend(
        &out, "  \"gpuctl\": {\"trace_id\": ", Quote(meta_.trace_id), ", ",
        "\"host\": \"node1\", \"pid\": ", kPid, ", \"job_id\": \"42\", \"rank\": ", meta_.rank,
        ", \"world_size\": 2, \"library_version\": \"1.0\", \"dropped_events\": ",
        meta_.dropped_events, ", \"window_start_ns\": ", meta_.window_start_ns,
        ", \"window_end_ns\": ", meta_.window_end_ns,
        ", \"host_only\": ", meta_.host_only ? "true" : "false",
        ", \"host_only_reason\": ", Quote(meta_.host_only_reason), ", \"activities\": [",
        absl::StrJoin(activities, ", "), "], \"cupti_version\": 24, \"cupti_path\": \"\"",
        ", \"cupti_active\": true, \"cupti_failed\": ", meta_.cupti_failed ? "true" : "false",
        ", \"cupti_message\": ", Quote(meta_.cupti_message),
        ", \"cupti_dropped_records\": ", meta_.cupti_dropped_records,
        ", \"dropped_at_cap\": ", meta_.dropped_at_cap, "},\n");
  }
  absl::StrAppend(&out, "  \"traceEvents\": [\n",
                  "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": ", kPid,
                  ", \"tid\": 0, \"ts\": 0.000, \"args\": {\"name\": \"python\"}}");
  for (const std::string& e : events_) absl::StrAppend(&out, ",\n  ", e);
  absl::StrAppend(&out, "\n  ],\n  \"traceName\": \"node1-rank", meta_.rank,
                  "-pid4242.json.gz\",\n  \"displayTimeUnit\": \"ms\",\n",
                  "  \"baseTimeNanoseconds\": ", meta_.base_time_ns, "\n}\n");
  return out;
}

std::string GzipMembers(const std::string& json, int members) {
  std::string out;
  const size_t piece = json.size() / static_cast<size_t>(members) + 1;
  for (size_t at = 0; at < json.size(); at += piece) {
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    const size_t n = std::min(piece, json.size() - at);
    std::string buf(deflateBound(&z, n) + 64, '\0');
    // zlib's Bytef is unsigned char; it does not write through next_in.
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(json.data() + at));  // NOLINT
    z.avail_in = static_cast<uInt>(n);
    z.next_out = reinterpret_cast<Bytef*>(buf.data());  // NOLINT: zlib's unsigned bytes
    z.avail_out = static_cast<uInt>(buf.size());
    deflate(&z, Z_FINISH);
    buf.resize(buf.size() - z.avail_out);
    deflateEnd(&z);
    out += buf;
  }
  return out;
}

}  // namespace gpuctl::analysis::testing
