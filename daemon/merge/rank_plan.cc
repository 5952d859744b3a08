#include "daemon/merge/rank_plan.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuctl::merge {
namespace {

constexpr int64_t kMaxRows = 999'999;

// A string member of `object`, or "".
std::string StringOf(const Json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// An integer member of `object` (a number or decimal text), or nullopt.
std::optional<int64_t> IntOf(const Json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  int64_t v = 0;
  if (it->is_string() && absl::SimpleAtoi(it->get<std::string>(), &v)) return v;
  return std::nullopt;
}

// "node1-rank3-pid4242.json.gz" -> host "node1", pid 4242 (gpuctl's file
// names, docs/trace-format.md); kineto files keep what they have.
void FromFileName(const std::string& path, RankPlan& plan) {
  const std::string name = std::filesystem::path(path).filename().string();
  const size_t rank_at = name.rfind("-rank");
  const size_t pid_at = name.rfind("-pid");
  if (rank_at == std::string::npos || pid_at == std::string::npos || pid_at < rank_at) return;
  if (plan.host.empty()) plan.host = name.substr(0, rank_at);
  int64_t pid = 0;
  const size_t end = name.find('.', pid_at);
  if (plan.pid < 0 && absl::SimpleAtoi(name.substr(pid_at + 4, end - pid_at - 4), &pid)) {
    plan.pid = pid;
  }
}

// The names the `M` events give, by pid and by row.
struct RowNames {
  std::map<std::string, std::string> process;  // pid text -> process_name
  std::map<std::string, std::string> label;    // pid text -> process_labels
  std::map<std::string, std::string> thread;   // RowKey -> thread_name
};

void NoteMetadata(const Json& event, RowNames& names) {
  const std::string name = StringOf(event, "name");
  const Json args = event.value("args", Json::object());
  const std::string pid = event.value("pid", Json()).dump();
  if (name == "process_name") names.process[pid] = StringOf(args, "name");
  if (name == "process_labels") names.label[pid] = StringOf(args, "labels");
  if (name == "thread_name") names.thread[RowKey(event)] = StringOf(args, "name");
}

// The row's name in the merged trace: the thread's own name on the rank's
// process; "<process> / <thread>" on its other rows (its GPUs, CUPTI
// overhead, a DataLoader worker).
std::string RowName(const RankRow& row, const RankPlan& plan, const RowNames& names) {
  const std::string key = absl::StrCat(row.pid.dump(), "/", row.tid.dump());
  const std::string tid = row.tid.is_string() ? row.tid.get<std::string>() : row.tid.dump();
  auto thread = names.thread.find(key);
  std::string thread_name = thread != names.thread.end() && !thread->second.empty()
                                ? thread->second
                                : absl::StrCat("thread ", tid);
  if (row.pid.is_number_integer() && row.pid.get<int64_t>() == plan.pid) return thread_name;
  const std::string pid_text = row.pid.dump();
  std::string process = absl::StrCat("pid ", pid_text);
  if (auto it = names.label.find(pid_text);
      it != names.label.end() && absl::StartsWith(it->second, "GPU ")) {
    process = it->second;  // kineto names a GPU after its host process, labels it GPU <n>
  } else if (auto p = names.process.find(pid_text);
             p != names.process.end() && !p->second.empty()) {
    process = p->second;
  }
  return absl::StrCat(process, " / ", thread_name);
}

void ReadHeader(const Json& members, RankPlan& plan) {
  if (auto base = IntOf(members, "baseTimeNanoseconds"); base.has_value()) {
    plan.base_time_ns = *base;
  }
  auto gpuctl = members.find("gpuctl");
  plan.format = gpuctl != members.end() && gpuctl->is_object() ? "gpuctl" : "kineto";
  if (plan.format == "gpuctl") {
    plan.host = StringOf(*gpuctl, "host");
    plan.trace_id = StringOf(*gpuctl, "trace_id");
    plan.pid = IntOf(*gpuctl, "pid").value_or(-1);
    plan.rank = IntOf(*gpuctl, "rank").value_or(-1);
  }
  if (plan.rank < 0) {
    auto info = members.find("distributedInfo");
    if (info != members.end()) plan.rank = IntOf(*info, "rank").value_or(-1);
  }
}

}  // namespace

std::string RowKey(const Json& event) {
  return absl::StrCat(event.value("pid", Json()).dump(), "/", event.value("tid", Json()).dump());
}

const RankRow* RankPlan::FindRow(const Json& event) const {
  auto it = row_index.find(RowKey(event));
  return it == row_index.end() ? nullptr : &rows[it->second];
}

absl::StatusOr<RankPlan> ScanRank(const std::string& path, const ManifestClocks& clocks) {
  absl::StatusOr<analysis::TraceInput> input = analysis::TraceInput::OpenFile(path);
  if (!input.ok()) return input.status();
  RankPlan plan;
  plan.path = path;
  RowNames names;
  // Times stay on the file's axis until the header (which both layouts
  // write after the events) gives the base time and the host.
  int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
  absl::StatusOr<StreamedHeader> header =
      StreamTrace(*std::move(input), path, [&](const StreamedEvent& e) -> absl::Status {
        const Json& event = e.value;
        if (PhaseOf(event) == "M") {
          NoteMetadata(event, names);
          return absl::OkStatus();
        }
        std::string key = RowKey(event);
        if (!plan.row_index.contains(key)) {
          if (plan.rows.size() >= static_cast<size_t>(kMaxRows)) {
            return absl::InvalidArgumentError(
                absl::StrCat(path, ": more than ", kMaxRows, " pid/tid rows; not merged"));
          }
          plan.row_index.emplace(std::move(key), plan.rows.size());
          plan.rows.push_back(
              RankRow{event.value("pid", Json()), event.value("tid", Json()), "", 0, 0});
        }
        if (std::optional<int64_t> ts = MicrosTextToNs(e.ts_text); ts.has_value()) {
          min_ts = std::min(min_ts, *ts);
          max_ts = std::max(max_ts, *ts);
        }
        return absl::OkStatus();
      });
  if (!header.ok()) return header.status();
  plan.events = header->events;
  plan.decompressed_bytes = header->decompressed_bytes;
  ReadHeader(header->members, plan);
  FromFileName(path, plan);
  const std::string file = std::filesystem::path(path).filename().string();
  if (auto it = clocks.by_file.find(file); it != clocks.by_file.end()) {
    plan.clock = it->second;
  } else if (auto host = clocks.by_host.find(plan.host); host != clocks.by_host.end()) {
    plan.clock = host->second;
  }
  if (min_ts <= max_ts) {
    plan.min_aligned_ns = plan.Align(min_ts);
    plan.max_aligned_ns = plan.Align(max_ts);
  }
  for (RankRow& row : plan.rows) row.name = RowName(row, plan, names);
  return plan;
}

absl::Status AssignMergedIds(std::vector<RankPlan>& ranks) {
  auto order = [](const RankPlan& p) {
    return std::make_tuple(p.rank < 0, p.rank, p.host, p.pid, p.path);
  };
  std::stable_sort(ranks.begin(), ranks.end(),
                   [&](const RankPlan& a, const RankPlan& b) { return order(a) < order(b); });
  for (size_t i = 0; i < ranks.size(); ++i) {
    RankPlan& plan = ranks[i];
    if (plan.rows.size() > static_cast<size_t>(kMaxRows)) {
      return absl::InvalidArgumentError(
          absl::StrCat(plan.path, ": more than ", kMaxRows, " pid/tid rows; not merged"));
    }
    plan.merged_pid = static_cast<int64_t>(i) + 1;
    plan.process_uuid = static_cast<uint64_t>(plan.merged_pid) << 32;
    for (size_t r = 0; r < plan.rows.size(); ++r) {
      plan.rows[r].merged_tid = plan.merged_pid * 1'000'000 + static_cast<int64_t>(r) + 1;
      plan.rows[r].uuid = plan.process_uuid + 1 + r;
    }
    const std::string host = plan.host.empty() ? "unknown host" : plan.host;
    plan.process_name = plan.rank >= 0
                            ? absl::StrFormat("%s rank %d pid %d", host, plan.rank, plan.pid)
                            : absl::StrFormat("%s pid %d", host, plan.pid);
    plan.labels = ClockLabel(plan.clock);
    if (!plan.trace_id.empty())
      plan.labels = absl::StrCat("trace ", plan.trace_id, ", ", plan.labels);
  }
  return absl::OkStatus();
}

}  // namespace gpuctl::merge
