#include "cli/ps_command.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cancel_group.h"
#include "cli/exit_codes.h"
#include "cli/format.h"
#include "cli/process_listing.h"
#include "cli/selector.h"

namespace gpuctl::cli {
namespace {

constexpr size_t kLabelsColumnChars = 40;
constexpr size_t kCommandColumnChars = 40;
constexpr size_t kReasonColumnChars = 80;

std::string LabelsText(const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.empty()) return "-";
  std::vector<std::pair<std::string, std::string>> sorted(labels.begin(), labels.end());
  std::sort(sorted.begin(), sorted.end());
  return Shorten(Printable(absl::StrJoin(sorted, ",", absl::PairFormatter("="))),
                 kLabelsColumnChars);
}

// How the process is attached.
std::string KindText(const v1::ProcessInfo& p) {
  switch (p.kind()) {
    case v1::PROCESS_KIND_LIBRARY:
      return "library";
    case v1::PROCESS_KIND_KINETO:
      return "kineto";
    default:
      return "-";
  }
}

// A kineto process whose own profiler runs (the job's torch.profiler) is
// busy though gpuctl asked it for nothing.
std::string StateText(const v1::ProcessInfo& p) {
  if (p.capture_state() == v1::CAPTURE_STATE_IDLE && p.profiler_busy()) return "busy";
  return CaptureStateWord(p.capture_state());
}

std::string StepText(const v1::ProcessInfo& p) {
  return p.has_current_step() ? absl::StrCat(p.current_step()) : "-";
}

void PrintTable(const std::vector<HostProcesses>& answers, bool wide, std::ostream& out) {
  Table table({"HOST", "PID", "RANK", "ROLE", "STEP", "JOB", "STATE", "LABELS", "KIND", "COMMAND"},
              {false, true, true, false, true, false, false, false, false, false});
  for (const HostProcesses& answer : answers) {
    std::vector<const v1::ProcessInfo*> rows;
    for (const v1::ProcessInfo& p : answer.response.processes()) rows.push_back(&p);
    std::sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
      return std::make_tuple(a->rank() < 0, a->rank(), a->pid()) <
             std::make_tuple(b->rank() < 0, b->rank(), b->pid());
    });
    for (const v1::ProcessInfo* p : rows) {
      // The host as contacted: daemons on one machine share a host name.
      table.AddRow({answer.target, absl::StrCat(p->pid()), RankText(p->rank()), RoleWord(p->role()),
                    StepText(*p), p->job_id().empty() ? "-" : Printable(p->job_id()), StateText(*p),
                    LabelsText(p->labels()), KindText(*p),
                    CommandText(p->cmdline(), wide ? 0 : kCommandColumnChars)});
    }
  }
  table.Render(out);
}

// Newest first per host, as the daemons send them.
void PrintRejected(const std::vector<HostProcesses>& answers, absl::TimeZone zone,
                   std::ostream& out) {
  Table table({"HOST", "PID", "UID", "TIME", "JOB", "REASON"},
              {false, true, true, false, false, false});
  for (const HostProcesses& answer : answers) {
    for (const v1::RejectedAttachment& r : answer.response.rejected()) {
      table.AddRow({answer.target, absl::StrCat(r.pid()), absl::StrCat(r.uid()),
                    TimestampText(r.time(), zone), r.job_id().empty() ? "-" : Printable(r.job_id()),
                    Shorten(Printable(r.reason()), kReasonColumnChars) +
                        (r.repeats() > 0 ? absl::StrCat(" x", r.repeats() + 1) : "")});
    }
  }
  table.Render(out);
}

size_t RejectedCount(const std::vector<HostProcesses>& answers) {
  size_t n = 0;
  for (const HostProcesses& answer : answers) n += answer.response.rejected_size();
  return n;
}

std::string PsJson(const std::vector<HostProcesses>& answers, bool include_rejected) {
  google::protobuf::Struct root;
  google::protobuf::ListValue* hosts = (*root.mutable_fields())["hosts"].mutable_list_value();
  for (const HostProcesses& answer : answers) {
    auto& fields = *hosts->add_values()->mutable_struct_value()->mutable_fields();
    fields["host"].set_string_value(answer.target);
    fields["hostname"].set_string_value(answer.response.host());
    fields["status"].set_string_value(std::string(HostStatusName(answer.status)));
    fields["error"].set_string_value(answer.error);
    google::protobuf::ListValue* processes = fields["processes"].mutable_list_value();
    for (const v1::ProcessInfo& p : answer.response.processes()) {
      SetJsonValue(processes->add_values(), p);
    }
    if (!include_rejected) continue;
    google::protobuf::ListValue* rejected = fields["rejected"].mutable_list_value();
    for (const v1::RejectedAttachment& r : answer.response.rejected()) {
      SetJsonValue(rejected->add_values(), r);
    }
  }
  return ToJson(root);
}

}  // namespace

int RunPs(const PsOptions& options, const CliEnv& env) {
  absl::StatusOr<std::vector<HostEntry>> hosts = ResolveHostSpecs(options.hosts);
  if (!hosts.ok()) {
    *env.err << "gpuctl: " << hosts.status().message() << "\n";
    return kExitUsage;
  }
  CancelGroup cancel(env.interrupts);
  std::vector<HostProcesses> answers =
      ListProcessesOnHosts(*hosts, options.selector, options.parallel, options.host_timeout, cancel,
                           options.include_rejected, env.security);
  if (cancel.cancelled()) {
    *env.err << "gpuctl: ps cancelled\n";
    return kExitInterrupted;
  }
  std::vector<HostStatus> statuses;
  std::vector<bool> answered;
  size_t rows = 0;
  for (const HostProcesses& answer : answers) {
    statuses.push_back(answer.status);
    answered.push_back(answer.status == HostStatus::kOk);
    rows += answer.response.processes_size();
    if (answer.status != HostStatus::kOk) *env.err << "gpuctl: " << answer.error << "\n";
  }
  if (options.json) {
    *env.out << PsJson(answers, options.include_rejected) << "\n";
    return FleetExitCode(statuses, answered);
  }
  if (options.include_rejected && RejectedCount(answers) > 0) {
    if (rows > 0) PrintTable(answers, options.wide, *env.out);
    *env.out << (rows > 0 ? "\n" : "") << "Refused lately:\n";
    PrintRejected(answers, env.time_zone, *env.out);
  } else if (rows > 0) {
    PrintTable(answers, options.wide, *env.out);
  }
  if (rows == 0 && std::count(answered.begin(), answered.end(), true) > 0) {
    std::string where = answers.size() == 1
                            ? absl::StrCat("gpuctld on ", Printable(answers[0].response.host()))
                            : absl::StrCat(answers.size(), " hosts");
    *env.err << "no processes"
             << (HasCriterion(options.selector)
                     ? absl::StrCat(" matching ", DescribeSelector(options.selector))
                     : "")
             << " attached to " << where << "\n";
  }
  return FleetExitCode(statuses, answered);
}

}  // namespace gpuctl::cli
