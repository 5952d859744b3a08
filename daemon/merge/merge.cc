#include "daemon/merge/merge.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/merge/merge_output.h"
#include "daemon/merge/rank_plan.h"

namespace gpuctl::merge {
namespace {

constexpr char kAlignment[] =
    "Each rank's times are moved onto the clock of the caller that requested the trace with its "
    "host's manifest clock offset. Where the caller timed clock probes right before the request "
    "(clock_round_trip_ns set), that is the midpoint offset of the fastest probe: the host's "
    "times are within half that round trip (clock_bound_ns) of the caller's clock, plus the "
    "clocks' drift since the request. Otherwise it is the receipt offset (daemon clock at receipt "
    "minus caller clock at sending), which includes the request's one-way transit: that host's "
    "times are early by its transit (typically tens to hundreds of microseconds on a LAN; not "
    "measured), and two such hosts are off from each other by the difference of their transits "
    "plus their clocks' drift since the request. Ranks without an offset keep their host's "
    "clock.";

// Phases whose events carry an id: flows (s, t, f), nestable async slices
// (b, e, n), the legacy async slices (S start, T and p steps, F finish) and
// objects (N, O, D).
bool IdPhase(const std::string& ph) {
  return ph == "s" || ph == "t" || ph == "f" || ph == "b" || ph == "e" || ph == "n" || ph == "S" ||
         ph == "T" || ph == "p" || ph == "F" || IsObjectPhase(ph);
}

// An event's id as Chrome's format writes it: `id`, else `id2`'s `global`
// or `local` member; nullptr with none.
const Json* IdOf(const Json& event, IdScope* scope) {
  if (auto id = event.find("id"); id != event.end()) {
    *scope = IdScope::kId;
    return &*id;
  }
  auto id2 = event.find("id2");
  if (id2 == event.end() || !id2->is_object()) return nullptr;
  if (auto global = id2->find("global"); global != id2->end()) {
    *scope = IdScope::kGlobal;
    return &*global;
  }
  if (auto local = id2->find("local"); local != id2->end()) {
    *scope = IdScope::kLocal;
    return &*local;
  }
  return nullptr;
}

// Flow, async and object ids are scoped per file (an id2 `local` id and an
// object's `id` per process of it); the merged trace needs them per rank.
// FNV-1a over (rank, category, scope, id and which kind of id; the event's
// own pid for a process-scoped one; an object's name), cut to 53 bits so
// that a JavaScript number holds it exactly. The labels mixed in are no
// JSON text, so no value can stand for one.
uint64_t MergedId(int64_t merged_pid, const std::string& ph, const Json& event, IdScope scope,
                  const Json& id) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](absl::string_view bytes) {
    for (char c : bytes) {
      h ^= static_cast<uint8_t>(c);
      h *= 0x100000001b3ULL;
    }
    h ^= 0xff;  // field separator
    h *= 0x100000001b3ULL;
  };
  mix(absl::StrCat(merged_pid));
  mix(event.value("cat", Json()).dump());
  if (auto legacy_scope = event.find("scope"); legacy_scope != event.end()) {
    mix("scope");
    mix(legacy_scope->dump());
  }
  const bool object = IsObjectPhase(ph);
  if (object) {
    mix("object");
    mix(event.value("name", Json()).dump());
  }
  if (scope == IdScope::kLocal || (object && scope == IdScope::kId)) {
    mix("pid");
    mix(event.value("pid", Json()).dump());
  }
  if (scope == IdScope::kLocal) mix("id2.local");
  if (scope == IdScope::kGlobal) mix("id2.global");
  mix(id.dump());
  const uint64_t merged = h & ((uint64_t{1} << 53) - 1);
  return merged == 0 ? 1 : merged;
}

// The second pass over one rank: every event aligned and handed to `sink`.
absl::Status WriteRank(const RankPlan& plan, MergeSink& sink, MergedRank& counts) {
  if (absl::Status s = sink.BeginRank(plan); !s.ok()) return s;
  absl::StatusOr<analysis::TraceInput> input = analysis::TraceInput::OpenFile(plan.path);
  if (!input.ok()) return input.status();
  absl::StatusOr<StreamedHeader> header =
      StreamTrace(*std::move(input), plan.path, [&](const StreamedEvent& e) -> absl::Status {
        MergeEvent event;
        event.streamed = &e;
        event.ph = PhaseOf(e.value);
        if (event.ph == "M") {
          ++counts.metadata;
          return absl::OkStatus();
        }
        if (event.ph.empty()) {  // no phase: nothing a viewer could draw
          ++counts.unsupported;
          return absl::OkStatus();
        }
        std::optional<int64_t> ts = MicrosTextToNs(e.ts_text);
        if (event.ph == "X") {
          event.dur_ns = MicrosTextToNs(e.dur_text);
          if (!event.dur_ns.has_value() || *event.dur_ns < 0) ts.reset();
        }
        if (!ts.has_value()) {
          ++counts.skipped;
          return absl::OkStatus();
        }
        event.aligned_ns = plan.Align(*ts);
        event.row = plan.FindRow(e.value);
        if (event.row == nullptr) {
          return absl::FailedPreconditionError(
              absl::StrCat(plan.path,
                           ": changed while it was merged (a row the first read did "
                           "not see); nothing was written"));
        }
        if (IdPhase(event.ph)) {
          IdScope scope = IdScope::kId;
          if (const Json* id = IdOf(e.value, &scope); id != nullptr) {
            event.merged_id = MergedId(plan.merged_pid, event.ph, e.value, scope, *id);
            event.id = id;
          }
        }
        absl::StatusOr<bool> wrote = sink.Event(plan, event);
        if (!wrote.ok()) return wrote.status();
        ++(*wrote ? counts.written : counts.unsupported);
        return absl::OkStatus();
      });
  if (!header.ok()) return header.status();
  if (header->events != plan.events) {
    return absl::FailedPreconditionError(absl::StrCat(plan.path, ": changed while it was merged (",
                                                      plan.events, " events, then ", header->events,
                                                      "); nothing was written"));
  }
  return absl::OkStatus();
}

Json Metadata(const MergeResult& result, const std::vector<RankPlan>& plans) {
  Json ranks = Json::array();
  for (size_t i = 0; i < plans.size(); ++i) {
    const RankPlan& p = plans[i];
    const MergedRank& r = result.ranks[i];
    const bool measured = p.clock.has_value() && p.clock->measured();
    ranks.push_back(Json{
        {"file", p.path},
        {"format", p.format},
        {"host", p.host},
        {"rank", p.rank},
        {"pid", p.pid},
        {"trace_id", p.trace_id},
        {"merged_pid", p.merged_pid},
        {"process_name", p.process_name},
        {"base_time_ns", p.base_time_ns},
        {"clock_offset_ns", p.clock.has_value() ? Json(p.clock->offset_ns) : Json(nullptr)},
        {"clock_receipt_offset_ns",
         p.clock.has_value() ? Json(p.clock->receipt_offset_ns) : Json(nullptr)},
        {"clock_round_trip_ns", measured ? Json(*p.clock->round_trip_ns) : Json(nullptr)},
        {"clock_bound_ns", measured ? Json(p.clock->bound_ns()) : Json(nullptr)},
        {"clock_manifest", p.clock.has_value() ? p.clock->manifest : ""},
        {"events", r.events},
        {"written", r.written},
        {"skipped", r.skipped},
        {"unsupported", r.unsupported},
    });
  }
  return Json{{"schema", "gpuctl.merge/1"},
              {"alignment", kAlignment},
              {"ranks", std::move(ranks)},
              {"warnings", result.warnings}};
}

}  // namespace

MergeResult ChooseOutput(const std::string& out, const MergeOptions& options, uint64_t events,
                         uint64_t bytes) {
  MergeResult result;
  result.path = out;
  const bool proto_name = absl::EndsWith(out, ".pftrace") || absl::EndsWith(out, ".perfetto-trace");
  if (options.format != MergeFormat::kAuto) {
    result.format = options.format;
  } else if (proto_name) {
    result.format = MergeFormat::kProto;
  } else if (events > options.json_max_events || bytes > options.json_max_bytes) {
    result.format = MergeFormat::kProto;
    for (absl::string_view suffix : {".json.gz", ".json"}) {
      if (absl::EndsWith(out, suffix)) {
        result.path = absl::StrCat(out.substr(0, out.size() - suffix.size()), ".pftrace");
        break;
      }
    }
  } else {
    result.format = MergeFormat::kJson;
  }
  result.gzip = result.format == MergeFormat::kJson && absl::EndsWith(result.path, ".gz");
  return result;
}

absl::StatusOr<MergeResult> MergeTraces(const std::vector<std::string>& files,
                                        const std::string& out, const MergeOptions& options) {
  if (files.empty()) return absl::InvalidArgumentError("no trace files to merge");
  ManifestClocks clocks;
  std::set<std::string> dirs;
  for (const std::string& file : files) {
    dirs.insert(std::filesystem::path(file).parent_path().string());
  }
  for (const std::string& dir : dirs) ReadManifestClocks(dir.empty() ? "." : dir, clocks);
  std::vector<RankPlan> plans;
  uint64_t events = 0, bytes = 0;
  for (const std::string& file : files) {
    absl::StatusOr<RankPlan> plan = ScanRank(file, clocks);
    if (!plan.ok()) return plan.status();
    events += plan->events;
    bytes += plan->decompressed_bytes;
    plans.push_back(*std::move(plan));
  }
  if (absl::Status s = AssignMergedIds(plans); !s.ok()) return s;
  MergeResult result = ChooseOutput(out, options, events, bytes);
  result.warnings = clocks.warnings;
  int64_t earliest = INT64_MAX;
  for (const RankPlan& p : plans) {
    earliest = std::min(earliest, p.min_aligned_ns);
    if (!p.clock.has_value() && !clocks.by_host.empty()) {
      result.warnings.push_back(absl::StrCat(p.path, ": no manifest clock offset for host ", p.host,
                                             "; this rank keeps its own clock"));
    }
  }
  // JSON's ts axis starts at the earliest event's second, as gpuctl's files do.
  if (earliest != INT64_MAX && earliest > 0) {
    result.base_time_ns = earliest / 1'000'000'000 * 1'000'000'000;
  }
  absl::StatusOr<std::unique_ptr<MergeOutput>> output =
      MergeOutput::Create(result.path, result.gzip);
  if (!output.ok()) return output.status();
  std::unique_ptr<MergeSink> sink = result.format == MergeFormat::kProto
                                        ? NewProtoSink(output->get())
                                        : NewJsonSink(output->get(), result.base_time_ns);
  for (const RankPlan& p : plans) {
    MergedRank& rank = result.ranks.emplace_back();
    rank.path = p.path;
    rank.process_name = p.process_name;
    rank.host = p.host;
    rank.rank = p.rank;
    rank.pid = p.pid;
    rank.merged_pid = p.merged_pid;
    rank.clock = p.clock;
    rank.events = p.events;
    if (absl::Status s = WriteRank(p, *sink, rank); !s.ok()) return s;
  }
  if (absl::Status s = sink->Finish(Metadata(result, plans)); !s.ok()) return s;
  if (absl::Status s = (*output)->Commit(); !s.ok()) return s;
  result.stored_bytes = (*output)->stored_bytes();
  return result;
}

}  // namespace gpuctl::merge
