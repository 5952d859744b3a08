#include "cli/trace_report.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/proto_time.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/time_util.h"

namespace gpuctl::cli {
namespace {

using google::protobuf::util::TimeUtil;

struct Row {
  // Host (in the order given), process rows before the host's own row, rank
  // (unknown last), pid.
  std::tuple<size_t, int, bool, int32_t, int32_t> key;
  std::vector<std::string> cells;
  std::string note;
};

std::vector<const v1::ProcessResult*> SortedResults(const HostTrace& host) {
  std::vector<const v1::ProcessResult*> rows;
  for (const auto& [pid, result] : host.results) rows.push_back(&result);
  std::sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    return std::make_tuple(a->rank() < 0, a->rank(), a->pid()) <
           std::make_tuple(b->rank() < 0, b->rank(), b->pid());
  });
  return rows;
}

std::string SavedName(const HostDownload& download, const std::string& file) {
  auto it = download.local_names.find(file);
  return it == download.local_names.end() ? file : it->second;
}

// The process's host context (activities cpu / sched), briefly; "" when
// not asked for.
std::string HostContextNote(const v1::ProcessResult& r) {
  if (!r.has_host_context()) return "";
  const v1::HostContextResult& h = r.host_context();
  if (h.state() != v1::HostContextResult::STATE_RECORDED) {
    return absl::StrCat("host context unavailable: ", Printable(h.reason()));
  }
  std::string note =
      absl::StrCat("host context: ", h.samples(), " samples, ", h.off_cpu_intervals(),
                   " off-CPU slices, ", h.threads(), " threads in ", h.processes(), " processes");
  const uint64_t missing = h.lost_records() + h.dropped_samples() + h.dropped_switches();
  if (missing > 0) absl::StrAppend(&note, ", ", missing, " records lost or over the cap");
  if (h.unwind() == v1::HOST_UNWIND_DWARF) {
    absl::StrAppend(&note, ", ", h.dwarf_unwound(), " unwound with DWARF");
    if (h.stacks_dropped() > 0)
      absl::StrAppend(&note, " (", h.stacks_dropped(), " past the copy budget)");
  }
  return note;
}

void AddHostRows(size_t index, const HostTrace& host, const HostDownload& download, bool fleet,
                 std::vector<Row>& rows) {
  // Rows name the host as it was contacted: daemons on one machine share a
  // host name, and an address is what --host takes.
  const std::string& name = host.target;
  for (const auto& [pid, r] : host.results) {
    std::string note;
    // A failure says why; so does a trace that is complete but not what was
    // asked for (host-only, opened late).
    if (r.status() != v1::CAPTURE_STATUS_OK || r.host_only() || r.late_start()) {
      note = Printable(r.message());
    }
    if (r.dropped_events() > 0) {
      absl::StrAppend(&note, note.empty() ? "" : "; ", r.dropped_events(),
                      " events dropped (capture buffers full)");
    }
    if (std::string host_context = HostContextNote(r); !host_context.empty()) {
      absl::StrAppend(&note, note.empty() ? "" : "; ", host_context);
    }
    const bool ok = r.status() == v1::CAPTURE_STATUS_OK;
    rows.push_back(
        Row{{index, 0, r.rank() < 0, r.rank(), r.pid()},
            {name, absl::StrCat(r.pid()), RankText(r.rank()), StatusWord(r.status()),
             ok ? absl::StrCat(r.event_count()) : "-", ok ? HumanBytes(r.stored_bytes()) : "-",
             r.file().empty() ? "-" : Printable(SavedName(download, r.file()))},
            std::move(note)});
  }
  for (const v1::ProcessInfo* p : host.Missing()) {
    rows.push_back(
        Row{{index, 0, p->rank() < 0, p->rank(), p->pid()},
            {name, absl::StrCat(p->pid()), RankText(p->rank()), "no result", "-", "-", "-"},
            "the daemon reported no result for this process"});
  }
  // With one host its failure is reported on stderr; a host that completed
  // is described by its process rows.
  if (fleet && host.status != HostStatus::kOk && !host.completed) {
    rows.push_back(Row{{index, 1, true, 0, 0},
                       {name, "-", "-", HostStatusWord(host.status), "-", "-", "-"},
                       Printable(host.error)});
  }
}

std::string FleetSummary(const TraceReport& report) {
  std::map<std::string, size_t> hosts;
  size_t ok = 0, failed = 0;
  for (const HostTrace& h : report.hosts) {
    ++hosts[HostStatusWord(h.status)];
    for (const auto& [pid, r] : h.results) (r.status() == v1::CAPTURE_STATUS_OK ? ok : failed)++;
    failed += h.Missing().size();
  }
  return absl::StrCat(report.hosts.size(), " hosts: ",
                      absl::StrJoin(hosts, ", ",
                                    [](std::string* s, const auto& e) {
                                      absl::StrAppend(s, e.second, " ", e.first);
                                    }),
                      "; processes: ", ok, " ok, ", failed, " failed");
}

google::protobuf::Value TimeValue(const google::protobuf::Timestamp& ts) {
  google::protobuf::Value v;
  if (IsSet(ts)) {
    v.set_string_value(TimeUtil::ToString(ts));
  } else {
    v.set_null_value(google::protobuf::NULL_VALUE);
  }
  return v;
}

google::protobuf::Value NullValue() {
  google::protobuf::Value v;
  v.set_null_value(google::protobuf::NULL_VALUE);
  return v;
}

google::protobuf::Value StringValue(std::string s) {
  google::protobuf::Value v;
  v.set_string_value(std::move(s));
  return v;
}

google::protobuf::Value DurationValue(std::optional<absl::Duration> d) {
  if (!d) return NullValue();
  google::protobuf::Duration proto;
  ToProtoDuration(*d, &proto);
  return StringValue(TimeUtil::ToString(proto));
}

google::protobuf::Value HostJson(const HostTrace& h, const HostDownload& download,
                                 const std::string& saved_to) {
  google::protobuf::Value value;
  auto& f = *value.mutable_struct_value()->mutable_fields();
  f["host"].set_string_value(h.target);
  f["hostname"].set_string_value(h.started ? h.started->host() : "");
  // Iteration windows: the first step this host captures.
  f["target"] = h.started && h.started->iterations() > 0
                    ? StringValue(absl::StrCat(h.started->start_step()))
                    : NullValue();
  f["status"].set_string_value(std::string(HostStatusName(h.status)));
  f["error"].set_string_value(h.error);
  if (h.started && h.started->has_clock()) {
    SetJsonValue(&f["clock"], h.started->clock());
    // Every key present: null when the CLI measured no round trip.
    auto& clock = *f["clock"].mutable_struct_value()->mutable_fields();
    for (const char* measured : {"midpointOffset", "roundTrip"}) {
      if (!clock.contains(measured)) clock[measured] = NullValue();
    }
  } else {
    f["clock"] = NullValue();
  }
  f["startTime"] = h.started ? TimeValue(h.started->start_time()) : NullValue();
  f["endTime"] = h.started ? TimeValue(h.started->end_time()) : NullValue();
  f["location"] = h.completed ? StringValue(h.completed->location()) : NullValue();
  if (h.completed && h.completed->has_storage()) {
    SetJsonValue(&f["storage"], h.completed->storage());
  } else {
    f["storage"] = NullValue();
  }
  size_t ok = 0;
  google::protobuf::ListValue* results = f["results"].mutable_list_value();
  for (const v1::ProcessResult* r : SortedResults(h)) {
    SetJsonValue(results->add_values(), *r);
    ok += r->status() == v1::CAPTURE_STATUS_OK;
  }
  google::protobuf::ListValue* missing = f["missingPids"].mutable_list_value();
  for (const v1::ProcessInfo* p : h.Missing()) missing->add_values()->set_number_value(p->pid());
  f["processesOk"].set_number_value(static_cast<double>(ok));
  f["processesFailed"].set_number_value(
      static_cast<double>(h.results.size() - ok + h.Missing().size()));
  google::protobuf::ListValue* files = f["files"].mutable_list_value();
  for (const DownloadedFile& file : download.files)
    files->add_values()->set_string_value(file.name);
  f["savedTo"] = download.files.empty() ? NullValue() : StringValue(saved_to);
  return value;
}

}  // namespace

void PrintTraceTable(const TraceReport& report, std::ostream& out) {
  const bool fleet = report.hosts.size() > 1;
  std::vector<Row> rows;
  for (size_t i = 0; i < report.hosts.size(); ++i) {
    AddHostRows(i, report.hosts[i], report.downloads[i], fleet, rows);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.key < b.key; });
  Table table({"HOST", "PID", "RANK", "STATUS", "EVENTS", "BYTES", "FILE"},
              {false, true, true, false, true, true, false});
  for (Row& row : rows) table.AddRow(std::move(row.cells), std::move(row.note));
  table.Render(out);
  if (fleet) out << FleetSummary(report) << "\n";
}

std::string TraceReportJson(const TraceReport& report) {
  google::protobuf::Struct root;
  auto& f = *root.mutable_fields();
  f["traceId"].set_string_value(report.trace_id);
  f["window"].set_string_value(report.iterations > 0 ? "iterations" : "time");
  if (report.start_time) {
    google::protobuf::Timestamp ts;
    ToProtoTime(*report.start_time, &ts);
    f["startTime"] = StringValue(TimeUtil::ToString(ts));
  } else {
    f["startTime"] = NullValue();
  }
  f["maxStartSkew"] = DurationValue(report.max_start_skew);
  f["duration"] = DurationValue(report.duration);
  f["iterations"].set_number_value(report.iterations);
  f["startStep"] = report.start_step ? StringValue(absl::StrCat(*report.start_step)) : NullValue();
  f["savedTo"] = report.saved_to.empty() ? NullValue() : StringValue(report.saved_to);
  google::protobuf::ListValue* hosts = f["hosts"].mutable_list_value();
  for (size_t i = 0; i < report.hosts.size(); ++i) {
    *hosts->add_values() = HostJson(report.hosts[i], report.downloads[i], report.saved_to);
  }
  return ToJson(root);
}

}  // namespace gpuctl::cli
