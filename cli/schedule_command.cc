#include "cli/schedule_command.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/bounded_parallel.h"
#include "cli/cancel_group.h"
#include "cli/connection.h"
#include "cli/duration.h"
#include "cli/exit_codes.h"
#include "cli/format.h"
#include "cli/host_status.h"
#include "cli/proto_time.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace gpuctl::cli {
namespace {

// Fingerprints are SHA-256 hex; a prefix tells schedules apart.
constexpr size_t kFingerprintChars = 16;

// Scheduled windows are opened on each host's own clock: hosts further
// apart than a start's tolerance (the 50ms of max_start_skew) capture out
// of step.
constexpr absl::Duration kClockTolerance = absl::Milliseconds(50);

struct HostSchedule {
  std::string target;
  HostStatus status = HostStatus::kOk;
  std::string error;
  v1::GetScheduleResponse response;
  // This machine's clock around the call: the host's `now` lies between.
  absl::Time sent;
  absl::Time received;
};

std::vector<HostSchedule> GetSchedules(const std::vector<HostEntry>& hosts,
                                       const ScheduleCommandOptions& options, CancelGroup& cancel,
                                       const ChannelSecurity& security) {
  v1::GetScheduleRequest request;
  request.set_next_slots(options.next_slots);
  if (!options.preview_job.empty()) {
    request.set_preview_job(options.preview_job);
    request.mutable_preview_duration()->set_seconds(absl::ToInt64Seconds(options.preview_duration));
  }
  std::vector<HostSchedule> answers(hosts.size());
  RunBounded(hosts.size(), options.parallel, [&](size_t i) {
    HostSchedule& answer = answers[i];
    answer.target = hosts[i].target;
    auto fail = [&](const absl::Status& status) {
      HostFailure failure = ClassifyFailure(status, answer.target);
      answer.status = failure.status;
      answer.error = std::move(failure.error);
    };
    if (cancel.cancelled()) return fail(absl::CancelledError("cancelled"));
    if (!hosts[i].error.empty()) {
      answer.status = HostStatus::kUnreachable;
      answer.error = hosts[i].error;
      return;
    }
    const absl::Time deadline = absl::Now() + options.host_timeout;
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        Connect(answer.target, options.host_timeout, cancel.flag(), security);
    if (!channel.ok()) return fail(channel.status());
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    grpc::Status status;
    {
      CancelGroup::Scope scope(&cancel, &context);
      answer.sent = absl::Now();
      status = v1::Gpuctl::NewStub(*channel)->GetSchedule(&context, request, &answer.response);
      answer.received = absl::Now();
    }
    if (cancel.cancelled() && !status.ok()) return fail(absl::CancelledError("cancelled"));
    if (!status.ok()) fail(FromRpcStatus(status));
  });
  return answers;
}

std::string Percent(double fraction) { return absl::StrCat(absl::SixDigits(fraction * 100), "%"); }

std::string ShortFingerprint(const std::string& fingerprint) {
  return fingerprint.empty() ? "-" : Printable(fingerprint.substr(0, kFingerprintChars));
}

void PrintRules(const v1::GetScheduleResponse& s, absl::TimeZone zone, std::ostream& out) {
  Table table({"RULE", "SELECTOR", "PROBABILITY", "PERIOD", "WINDOW", "DUTY CYCLE", "DAILY CAP",
               "BLACKOUTS", "NEXT SLOTS"},
              {false, false, true, true, true, true, true, false, false});
  for (const v1::ScheduleRuleInfo& r : s.rules()) {
    const bool steps = r.window_steps() > 0;
    const bool anomaly = !r.anomaly().empty();
    std::vector<std::string> next;
    for (const auto& t : r.next_slots()) next.push_back(TimestampText(t, zone));
    std::string period = steps ? absl::StrCat(r.step_period(), " steps")
                               : FormatUserDuration(FromProtoDuration(r.period()));
    if (anomaly) period = "anomaly";
    table.AddRow({Printable(r.name()), Printable(r.selector()), absl::StrCat(r.probability()),
                  period,
                  steps ? absl::StrCat(r.window_steps(), " steps")
                        : FormatUserDuration(FromProtoDuration(r.window())),
                  Percent(r.duty_cycle()), r.daily_cap() == 0 ? "-" : absl::StrCat(r.daily_cap()),
                  r.blackouts().empty() ? "-" : Printable(absl::StrJoin(r.blackouts(), "; ")),
                  anomaly       ? Printable(r.anomaly())
                  : !r.driven() ? "not driven (step rule)"
                  : steps       ? "by step number"
                                : absl::StrJoin(next, ", ")});
  }
  table.Render(out);
}

void PrintBudget(const v1::GetScheduleResponse& s, std::ostream& out) {
  out << "today (UTC): " << s.captures_today() << " captures, " << s.skips_today()
      << " skips; capture time " << FormatUserDuration(FromProtoDuration(s.capture_time_today()));
  if (s.capture_time_per_day().seconds() > 0 || s.capture_time_per_day().nanos() > 0) {
    out << " of " << FormatUserDuration(FromProtoDuration(s.capture_time_per_day())) << " per day";
  }
  if (s.min_free_store_bytes() > 0) {
    out << "; captures stop below " << HumanBytes(s.min_free_store_bytes()) << " free";
  }
  out << "\n";
}

void PrintEvents(const v1::GetScheduleResponse& s, absl::TimeZone zone, std::ostream& out) {
  if (s.events().empty()) {
    out << "no captures or skips yet\n";
    return;
  }
  Table table({"DECIDED", "RULE", "JOB", "SLOT", "START", "OUTCOME", "TRACE ID"},
              {false, false, false, true, false, false, false});
  for (const v1::ScheduleEvent& e : s.events()) {
    std::string outcome = Printable(e.outcome());
    if (!e.error().empty()) {
      absl::StrAppend(&outcome, ": ", e.pid() != 0 ? absl::StrCat("pid ", e.pid(), ": ") : "",
                      Printable(e.error()));
    }
    if (!e.anomaly().empty()) absl::StrAppend(&outcome, " (", Printable(e.anomaly()), ")");
    table.AddRow({TimestampText(e.decided_at(), zone), Printable(e.rule()), Printable(e.job_id()),
                  absl::StrCat(e.slot()), TimestampText(e.start_time(), zone), outcome,
                  e.captured() ? Printable(e.trace_id()) : "-"});
  }
  table.Render(out);
}

void PrintHost(const HostSchedule& h, absl::TimeZone zone, std::ostream& out) {
  const v1::GetScheduleResponse& s = h.response;
  out << "host " << h.target << " (" << Printable(s.host()) << ")";
  if (!s.enabled()) {
    out << ": no schedule configured\n";
    return;
  }
  out << ": schedule " << ShortFingerprint(s.fingerprint()) << ", duty cycle ceiling "
      << Percent(s.max_duty_cycle()) << "\n";
  PrintRules(s, zone, out);
  PrintBudget(s, out);
  PrintEvents(s, zone, out);
}

// "host-b (9e1f...), host-c (-)" for the hosts whose fingerprint differs
// from the first answer's; empty when all agree.
std::string OtherSchedules(const std::vector<HostSchedule>& answers) {
  const HostSchedule* first = nullptr;
  std::vector<std::string> others;
  for (const HostSchedule& h : answers) {
    if (h.status != HostStatus::kOk) continue;
    if (first == nullptr) {
      first = &h;
    } else if (h.response.fingerprint() != first->response.fingerprint()) {
      others.push_back(
          absl::StrCat(h.target, " (", ShortFingerprint(h.response.fingerprint()), ")"));
    }
  }
  if (others.empty()) return "";
  return absl::StrCat("hosts running another schedule than ", first->target, " (",
                      ShortFingerprint(first->response.fingerprint()),
                      "): ", absl::StrJoin(others, ", "));
}

// "node7:7070's clock is 1.2s ahead of this machine's (+-3ms): ...", or
// empty when the host's clock is within kClockTolerance of this one's.
std::string ClockSkewText(const HostSchedule& h) {
  if (h.status != HostStatus::kOk || !h.response.has_now()) return "";
  const absl::Time now = absl::FromUnixSeconds(h.response.now().seconds()) +
                         absl::Nanoseconds(h.response.now().nanos());
  const absl::Duration half = (h.received - h.sent) / 2;
  const absl::Duration offset = now - (h.sent + half);
  if (absl::AbsDuration(offset) <= kClockTolerance + half) return "";
  const absl::Duration ms = absl::Milliseconds(1);
  return absl::StrCat(h.target, "'s clock is ",
                      FormatUserDuration(absl::Trunc(absl::AbsDuration(offset), ms)),
                      offset > absl::ZeroDuration() ? " ahead of" : " behind",
                      " this machine's (+-", FormatUserDuration(absl::Ceil(half, ms)),
                      "): its scheduled windows open out of step with hosts whose clocks agree "
                      "with this one's");
}

std::string PreviewKey(const v1::GetScheduleResponse& s) {
  std::string key;
  for (const v1::PreviewSlot& p : s.preview()) {
    absl::StrAppend(&key, p.rule(), "/", p.slot(), "/", p.trace_id(), "/", p.outcome(), "\n");
  }
  return key;
}

void PrintPreview(const HostSchedule& h, const ScheduleCommandOptions& options, absl::TimeZone zone,
                  std::ostream& out) {
  const v1::GetScheduleResponse& s = h.response;
  if (s.preview().empty()) {
    out << "no slot of the next " << FormatUserDuration(options.preview_duration)
        << " captures job " << Printable(options.preview_job) << "\n";
    return;
  }
  Table table({"START", "RULE", "SLOT", "WINDOW", "OUTCOME", "TRACE ID"},
              {false, false, true, true, false, false});
  for (const v1::PreviewSlot& p : s.preview()) {
    table.AddRow({TimestampText(p.start_time(), zone), Printable(p.rule()), absl::StrCat(p.slot()),
                  FormatUserDuration(FromProtoDuration(p.window())), Printable(p.outcome()),
                  Printable(p.trace_id())});
  }
  table.Render(out);
  if (s.preview_truncated()) out << "(more slots follow: ask for fewer --hours)\n";
}

// The hosts whose preview differs from the first answer's: they will not
// capture the job together.
std::vector<std::string> PreviewMismatches(const std::vector<HostSchedule>& answers) {
  const HostSchedule* first = nullptr;
  std::vector<std::string> out;
  for (const HostSchedule& h : answers) {
    if (h.status != HostStatus::kOk) continue;
    if (first == nullptr) {
      first = &h;
    } else if (PreviewKey(h.response) != PreviewKey(first->response)) {
      out.push_back(h.target);
    }
  }
  return out;
}

std::string ScheduleJson(const std::vector<HostSchedule>& answers) {
  google::protobuf::Struct root;
  google::protobuf::ListValue* hosts = (*root.mutable_fields())["hosts"].mutable_list_value();
  for (const HostSchedule& answer : answers) {
    auto& fields = *hosts->add_values()->mutable_struct_value()->mutable_fields();
    fields["host"].set_string_value(answer.target);
    fields["status"].set_string_value(std::string(HostStatusName(answer.status)));
    fields["error"].set_string_value(answer.error);
    if (answer.status != HostStatus::kOk) continue;
    SetJsonValue(&fields["schedule"], answer.response);
    if (!answer.response.has_now()) continue;
    // The host's clock minus this machine's, at the call's midpoint.
    const absl::Time now = absl::FromUnixSeconds(answer.response.now().seconds()) +
                           absl::Nanoseconds(answer.response.now().nanos());
    fields["clock_offset_ms"].set_number_value(
        absl::ToDoubleMilliseconds(now - (answer.sent + (answer.received - answer.sent) / 2)));
  }
  return ToJson(root);
}

}  // namespace

int RunSchedule(const ScheduleCommandOptions& options, const CliEnv& env) {
  absl::StatusOr<std::vector<HostEntry>> hosts = ResolveHostSpecs(options.hosts);
  if (!hosts.ok()) {
    *env.err << "gpuctl: " << hosts.status().message() << "\n";
    return kExitUsage;
  }
  CancelGroup cancel(env.interrupts);
  std::vector<HostSchedule> answers = GetSchedules(*hosts, options, cancel, env.security);
  if (cancel.cancelled()) {
    *env.err << "gpuctl: schedule cancelled\n";
    return kExitInterrupted;
  }
  std::vector<HostStatus> statuses;
  std::vector<bool> answered;
  const HostSchedule* first = nullptr;
  for (const HostSchedule& answer : answers) {
    statuses.push_back(answer.status);
    answered.push_back(answer.status == HostStatus::kOk);
    if (answer.status != HostStatus::kOk) *env.err << "gpuctl: " << answer.error << "\n";
    if (answer.status == HostStatus::kOk && first == nullptr) first = &answer;
  }
  if (const std::string other = OtherSchedules(answers); !other.empty()) {
    *env.err << "gpuctl: " << other << "\n";
  }
  for (const HostSchedule& answer : answers) {
    if (const std::string skew = ClockSkewText(answer); !skew.empty()) {
      *env.err << "gpuctl: " << skew << "\n";
    }
  }
  const bool preview = !options.preview_job.empty();
  const std::vector<std::string> mismatched =
      preview ? PreviewMismatches(answers) : std::vector<std::string>();
  if (options.json) {
    *env.out << ScheduleJson(answers) << "\n";
  } else if (preview && first != nullptr) {
    PrintPreview(*first, options, env.time_zone, *env.out);
  } else {
    for (const HostSchedule& answer : answers) {
      if (answer.status != HostStatus::kOk) continue;
      if (&answer != first) *env.out << "\n";
      PrintHost(answer, env.time_zone, *env.out);
    }
  }
  if (!mismatched.empty()) {
    *env.err << "gpuctl: these hosts would capture job " << Printable(options.preview_job)
             << " in other slots than " << first->target << ": " << absl::StrJoin(mismatched, ", ")
             << "\n";
    return kExitPartialFailure;
  }
  return FleetExitCode(statuses, answered);
}

}  // namespace gpuctl::cli
