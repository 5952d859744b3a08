// The merged trace as Chrome trace-event JSON (docs/analyze.md, "--merge"):
// every rank one process, its rows threads of it, times on one base.
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/merge/merge_output.h"

namespace gpuctl::merge {
namespace {

// Members written from the merge's own values rather than copied: an
// event with a merged id has it as its one `id`, whether the file wrote
// `id` or `id2` (a viewer reads `id` first and would see both).
bool Rewritten(const std::string& key, bool merged_id) {
  if (key == "id" || key == "id2") return merged_id;
  return key == "ph" || key == "pid" || key == "tid" || key == "ts" || key == "dur";
}

std::string Dump(const Json& value) {
  // Strings that are not UTF-8 are repaired (U+FFFD), as gpuctld writes them.
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ns as µs with three decimals: exact.
std::string Micros(int64_t ns) {
  const uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return absl::StrFormat("%s%d.%03d", ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
}

class JsonSink : public MergeSink {
 public:
  JsonSink(MergeOutput* out, int64_t base_time_ns) : out_(out), base_time_ns_(base_time_ns) {}

  absl::Status BeginRank(const RankPlan& rank) override {
    if (absl::Status s =
            Metadata("process_name", rank.merged_pid, 0, Json{{"name", rank.process_name}});
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            Metadata("process_labels", rank.merged_pid, 0, Json{{"labels", rank.labels}});
        !s.ok()) {
      return s;
    }
    if (absl::Status s = Metadata("process_sort_index", rank.merged_pid, 0,
                                  Json{{"sort_index", rank.merged_pid}});
        !s.ok()) {
      return s;
    }
    for (size_t r = 0; r < rank.rows.size(); ++r) {
      const RankRow& row = rank.rows[r];
      if (absl::Status s =
              Metadata("thread_name", rank.merged_pid, row.merged_tid, Json{{"name", row.name}});
          !s.ok()) {
        return s;
      }
      if (absl::Status s = Metadata("thread_sort_index", rank.merged_pid, row.merged_tid,
                                    Json{{"sort_index", r}});
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Event(const RankPlan& rank, const MergeEvent& e) override {
    std::string text = absl::StrCat(Separator(), "{\"ph\":", Dump(e.ph),
                                    ",\"pid\":", rank.merged_pid, ",\"tid\":", e.row->merged_tid,
                                    ",\"ts\":", Micros(e.aligned_ns - base_time_ns_));
    if (e.dur_ns.has_value()) absl::StrAppend(&text, ",\"dur\":", Micros(*e.dur_ns));
    if (e.merged_id.has_value()) absl::StrAppend(&text, ",\"id\":", *e.merged_id);
    for (const auto& [key, value] : e.streamed->value.items()) {
      if (Rewritten(key, e.merged_id.has_value())) continue;
      absl::StrAppend(&text, ",", Dump(Json(key)), ":", Dump(value));
    }
    text.push_back('}');
    if (absl::Status s = out_->Write(text); !s.ok()) return s;
    return true;
  }

  absl::Status Finish(const Json& metadata) override {
    return out_->Write(absl::StrCat(first_ ? "{\"traceEvents\":[" : "",
                                    "\n],\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":",
                                    base_time_ns_, ",\"gpuctlMerge\":", Dump(metadata), "}\n"));
  }

 private:
  // `[` before the first event, `,` before the others.
  const char* Separator() {
    const char* s = first_ ? "{\"traceEvents\":[\n" : ",\n";
    first_ = false;
    return s;
  }

  absl::Status Metadata(const char* name, int64_t pid, int64_t tid, const Json& args) {
    return out_->Write(absl::StrCat(Separator(), "{\"ph\":\"M\",\"name\":\"", name, "\",\"pid\":",
                                    pid, ",\"tid\":", tid, ",\"ts\":0,\"args\":", Dump(args), "}"));
  }

  MergeOutput* out_;
  int64_t base_time_ns_;
  bool first_ = true;
};

}  // namespace

std::unique_ptr<MergeSink> NewJsonSink(MergeOutput* out, int64_t base_time_ns) {
  return std::make_unique<JsonSink>(out, base_time_ns);
}

}  // namespace gpuctl::merge
