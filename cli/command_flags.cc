#include "cli/command_flags.h"

#include <algorithm>
#include <array>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/download.h"
#include "cli/duration.h"
#include "cli/flag_number.h"
#include "cli/format.h"
#include "daemon/common/trace_id.h"

namespace gpuctl::cli {
namespace {

// TraceRequest.kineto_options (docs/pytorch.md).
constexpr std::array<const char*, 5> kKinetoOptionNames = {
    "with_stack", "record_shapes", "profile_memory", "with_flops", "with_modules"};

}  // namespace
namespace {

absl::Status Usage(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

absl::StatusOr<absl::Duration> FlagDuration(absl::string_view flag, const std::string& text,
                                            absl::Duration max, bool allow_zero = false) {
  absl::StatusOr<absl::Duration> d = ParseUserDuration(text, allow_zero);
  if (!d.ok()) return Usage(flag, d.status().message());
  if (*d > max) return Usage(flag, absl::StrCat("at most ", FormatUserDuration(max)));
  return d;
}

bool Given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

struct FleetSettings {
  std::vector<HostSpec> hosts;
  size_t parallel;
  absl::Duration host_timeout;
};

absl::StatusOr<FleetSettings> ValidateFleet(const FleetFlags& flags, absl::string_view env_host) {
  FleetSettings fleet;
  absl::StatusOr<std::vector<HostSpec>> hosts = ParseHostFlags(flags.hosts, env_host);
  if (!hosts.ok()) return hosts.status();
  fleet.hosts = *std::move(hosts);
  absl::StatusOr<uint64_t> parallel = ParseFlagNumber(
      "--parallel", flags.parallel, "a number of hosts to contact at once", 1, kMaxParallel);
  if (!parallel.ok()) return parallel.status();
  fleet.parallel = static_cast<size_t>(*parallel);
  absl::StatusOr<absl::Duration> timeout =
      FlagDuration("--host-timeout", flags.host_timeout, kMaxUserDuration);
  if (!timeout.ok()) return timeout.status();
  fleet.host_timeout = *timeout;
  return fleet;
}

absl::Status ValidateIterationFlags(const TraceFlags& f, TraceOptions& options) {
  const bool iterations = Given(f.iterations_option);
  for (const CLI::Option* option :
       {f.start_step_option, f.step_roundup_option, f.step_margin_option}) {
    if (Given(option) && !iterations) {
      return Usage(option->get_name(), "applies to iteration windows; add --iterations N");
    }
  }
  if (!iterations) return absl::OkStatus();
  absl::StatusOr<uint64_t> count =
      ParseFlagNumber("--iterations", f.iterations, "a number of steps", 1, kMaxIterations);
  if (!count.ok()) return count.status();
  if (Given(f.max_start_skew_option)) {
    return Usage("--max-start-skew", "applies to time windows, not to --iterations");
  }
  options.iterations = static_cast<uint32_t>(*count);
  absl::StatusOr<uint64_t> roundup =
      ParseFlagNumber("--step-roundup", f.step_roundup, "a step count to round the start up to", 1,
                      std::numeric_limits<uint32_t>::max());
  if (!roundup.ok()) return roundup.status();
  options.step_roundup = static_cast<uint32_t>(*roundup);
  if (Given(f.start_step_option)) {
    if (Given(f.step_roundup_option) || Given(f.step_margin_option)) {
      return Usage("--start-step",
                   "--step-roundup and --step-margin pick the start step; "
                   "give either them or --start-step");
    }
    absl::StatusOr<uint64_t> step = ParseFlagNumber("--start-step", f.start_step, "a step number",
                                                    0, std::numeric_limits<uint64_t>::max());
    if (!step.ok()) return step.status();
    options.start_step = *step;
  }
  if (f.step_margin != "auto") {
    absl::StatusOr<uint64_t> margin =
        ParseFlagNumber("--step-margin", f.step_margin, "\"auto\" or a number of steps", 0,
                        std::numeric_limits<uint32_t>::max());
    if (!margin.ok()) return margin.status();
    options.step_margin = static_cast<uint32_t>(*margin);
  }
  return absl::OkStatus();
}

absl::Status ValidateWindowFlags(const TraceFlags& f, TraceOptions& options) {
  if (Given(f.duration_option)) {
    absl::StatusOr<absl::Duration> duration =
        FlagDuration("--duration", f.duration, kMaxUserDuration);
    if (!duration.ok()) return duration.status();
    options.duration = *duration;
  } else if (!Given(f.iterations_option)) {
    return absl::InvalidArgumentError(
        "--duration is required for a time window (or give --iterations N)");
  }
  // 0: the instant is already past when a host gets it, so every host opens
  // at once (what measuring the fan-out itself wants); a host that gets it
  // later than --max-start-skew refuses it. Not given: see TraceOptions.
  if (Given(f.start_delay_option)) {
    absl::StatusOr<absl::Duration> delay =
        FlagDuration("--start-delay", f.start_delay, kMaxStartDelay, /*allow_zero=*/true);
    if (!delay.ok()) return delay.status();
    options.start_delay = *delay;
  }
  absl::StatusOr<absl::Duration> skew =
      FlagDuration("--max-start-skew", f.max_start_skew, kMaxStartDelay);
  if (!skew.ok()) return skew.status();
  options.max_start_skew = *skew;
  return ValidateIterationFlags(f, options);
}

}  // namespace

absl::Status ValidateTraceId(absl::string_view what, const std::string& trace_id) {
  if (IsValidTraceId(trace_id)) return absl::OkStatus();
  return Usage(what, absl::StrCat("\"", Printable(trace_id),
                                  "\" is not a lowercase UUIDv7 like "
                                  "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b"));
}

void AddFleetFlags(CLI::App* command, FleetFlags& flags) {
  command
      ->add_option("--host", flags.hosts.hosts,
                   "gpuctld address HOST[:PORT], repeatable (default $GPUCTL_HOST, else "
                   "127.0.0.1:7070)")
      ->allow_extra_args(false)
      ->delimiter(',');
  command
      ->add_option("--hosts-file", flags.hosts.hosts_files,
                   "File of gpuctld addresses, one per line, # comments (repeatable)")
      ->allow_extra_args(false);
  command
      ->add_option("--hosts", flags.hosts.dns,
                   "dns:NAME[:PORT]: every address NAME resolves to (repeatable)")
      ->allow_extra_args(false);
  command
      ->add_option("--parallel", flags.parallel,
                   "Hosts being connected to at once (dispatch window)")
      ->capture_default_str();
  command
      ->add_option("--host-timeout", flags.host_timeout,
                   "Per host: connect and get an answer within this")
      ->capture_default_str();
}

void AddSelectorFlags(CLI::App* command, SelectorFlags& flags, bool for_trace) {
  const std::string what = for_trace ? "to trace" : "to list";
  command->add_option("--job", flags.job_id, "Job id of the processes " + what);
  command->add_option("--pid", flags.pids, "Process id (repeatable; selects its descendants too)")
      ->allow_extra_args(false)
      ->delimiter(',');
  command->add_option("--rank", flags.rank_sets, "Rank set, e.g. 0-3,8 (repeatable)")
      ->allow_extra_args(false);
  command->add_option("--label", flags.labels, "Label KEY=VALUE the processes carry (repeatable)")
      ->allow_extra_args(false);
  command->add_option("--limit", flags.limit,
                      "At most N processes per host, lowest ranks first (0: no limit)");
  command->add_flag("--include-helpers", flags.include_helpers,
                    "Also select launchers and forked helpers");
  command->add_flag("--all-jobs", flags.all_jobs,
                    "Let a --pid that is not attached select processes of several jobs (a shell "
                    "that started them); without it that is refused");
}

void AddTraceFlags(CLI::App* command, TraceFlags& f) {
  f.duration_option = command->add_option(
      "--duration", f.duration,
      "Capture window, e.g. 5s, 500ms, 1m30s (with --iterations: the bound of the wait)");
  command->add_option("-o,--output", f.output_root, "Download directory")->capture_default_str();
  command->add_option("--trace-id", f.trace_id, "Trace id, a UUIDv7 (default: a new one)");
  command
      ->add_option("--activities", f.activities,
                   "What to record, comma-separated: GPU activity kernel,memcpy,memset,runtime,"
                   "driver,sync,nvtx,overhead,memory (default: all but driver and memory); host "
                   "context cpu (CPU samples), sched (off-CPU time), off by default")
      ->delimiter(',');
  command
      ->add_option("--kineto", f.kineto_options,
                   "What PyTorch processes under the kineto bridge also record, comma-separated: "
                   "with_stack,record_shapes,profile_memory,with_flops,with_modules")
      ->delimiter(',');
  command->add_option("--unwind", f.unwind,
                      "With the cpu activity, how CPU samples find their callers: fp (frame "
                      "pointers, the default) or dwarf (also a copy of each sample's stack, "
                      "unwound with call-frame information: code built without frame pointers)");
  command->add_flag("--no-download", f.no_download, "Leave the trace on the daemons' hosts");
  command->add_flag("--json", f.json, "Print one machine-readable JSON document");
  f.start_delay_option = command->add_option(
      "--start-delay", f.start_delay,
      "Every host opens its window this long after the command starts (covers the fan-out to "
      "the hosts, docs/cli.md). Default: one host: the daemon's start delay; several: 500ms");
  f.max_start_skew_option =
      command
          ->add_option("--max-start-skew", f.max_start_skew,
                       "A process opening later than this after the start instant runs its own "
                       "full window and is marked late")
          ->capture_default_str();
  f.iterations_option = command->add_option(
      "--iterations", f.iterations, "Capture N steps (gpuctl_step marks) instead of a time window");
  f.start_step_option =
      command->add_option("--start-step", f.start_step, "First step captured (default: picked)");
  f.step_roundup_option =
      command->add_option("--step-roundup", f.step_roundup, "The start step is a multiple of K")
          ->capture_default_str();
  f.step_margin_option =
      command
          ->add_option("--step-margin", f.step_margin,
                       "Steps between the largest current step and the start step, or auto")
          ->capture_default_str();
}

absl::StatusOr<TraceOptions> ValidateTraceFlags(const TraceFlags& f, const FleetFlags& fleet_flags,
                                                const SelectorFlags& selector_flags,
                                                absl::string_view env_host) {
  TraceOptions options;
  absl::StatusOr<FleetSettings> fleet = ValidateFleet(fleet_flags, env_host);
  if (!fleet.ok()) return fleet.status();
  options.hosts = std::move(fleet->hosts);
  options.parallel = fleet->parallel;
  options.host_timeout = fleet->host_timeout;
  absl::StatusOr<v1::ProcessSelector> selector = BuildSelector(selector_flags);
  if (!selector.ok()) return selector.status();
  if (!HasCriterion(*selector)) {
    return absl::InvalidArgumentError(
        "trace: select processes with --job ID, --pid N, --rank SET and/or --label KEY=VALUE");
  }
  options.selector = *std::move(selector);
  if (absl::Status s = ValidateWindowFlags(f, options); !s.ok()) return s;
  if (!f.trace_id.empty()) {
    if (absl::Status s = ValidateTraceId("--trace-id", f.trace_id); !s.ok()) return s;
  }
  options.trace_id = f.trace_id;
  for (const std::string& activity : f.activities) {
    if (std::find(kActivityNames.begin(), kActivityNames.end(), activity) == kActivityNames.end()) {
      return Usage("--activities", absl::StrCat("unknown activity \"", Printable(activity),
                                                "\"; valid: ", absl::StrJoin(kActivityNames, ",")));
    }
  }
  options.activities = f.activities;
  for (const std::string& option : f.kineto_options) {
    if (std::find(std::begin(kKinetoOptionNames), std::end(kKinetoOptionNames), option) ==
        std::end(kKinetoOptionNames)) {
      return Usage("--kineto", absl::StrCat("unknown option \"", Printable(option),
                                            "\"; valid: ", absl::StrJoin(kKinetoOptionNames, ",")));
    }
  }
  options.kineto_options = f.kineto_options;
  if (!f.unwind.empty()) {
    if (f.unwind != "fp" && f.unwind != "dwarf") {
      return Usage("--unwind", absl::StrCat("unknown unwinding \"", Printable(f.unwind),
                                            "\"; valid: fp,dwarf"));
    }
    if (std::find(f.activities.begin(), f.activities.end(), "cpu") == f.activities.end()) {
      return Usage("--unwind", "needs the cpu activity (--activities ...,cpu)");
    }
    options.host_unwind =
        f.unwind == "dwarf" ? v1::HOST_UNWIND_DWARF : v1::HOST_UNWIND_FRAME_POINTER;
  }
  if (f.output_root.empty()) return Usage("-o", "empty directory");
  options.output_root = f.output_root;
  options.download = !f.no_download;
  options.json = f.json;
  return options;
}

absl::StatusOr<PsOptions> ValidatePsFlags(const PsFlags& ps, const FleetFlags& fleet_flags,
                                          const SelectorFlags& selector_flags,
                                          absl::string_view env_host) {
  PsOptions options;
  absl::StatusOr<FleetSettings> fleet = ValidateFleet(fleet_flags, env_host);
  if (!fleet.ok()) return fleet.status();
  options.hosts = std::move(fleet->hosts);
  options.parallel = fleet->parallel;
  options.host_timeout = fleet->host_timeout;
  absl::StatusOr<v1::ProcessSelector> selector = BuildSelector(selector_flags);
  if (!selector.ok()) return selector.status();
  options.selector = *std::move(selector);
  options.json = ps.json;
  options.include_rejected = ps.all;
  options.wide = ps.wide;
  return options;
}

void AddScheduleFlags(CLI::App* command, ScheduleFlags& flags) {
  command->add_flag("--json", flags.json, "Print one machine-readable JSON document");
  command->add_option("--next", flags.next, "Upcoming slots shown per rule (1-100)")
      ->capture_default_str();
  command->add_flag("--preview", flags.preview,
                    "List the slots that would capture the job given with --job");
  command->add_option("--job", flags.job, "The job to preview");
  command->add_option("--hours", flags.hours, "How far ahead to preview (1-168)")
      ->capture_default_str();
}

absl::StatusOr<ScheduleCommandOptions> ValidateScheduleFlags(const ScheduleFlags& f,
                                                             const FleetFlags& fleet_flags,
                                                             absl::string_view env_host) {
  ScheduleCommandOptions options;
  absl::StatusOr<FleetSettings> fleet = ValidateFleet(fleet_flags, env_host);
  if (!fleet.ok()) return fleet.status();
  options.hosts = std::move(fleet->hosts);
  options.parallel = fleet->parallel;
  options.host_timeout = fleet->host_timeout;
  options.json = f.json;
  absl::StatusOr<uint64_t> next = ParseFlagNumber("--next", f.next, "a number of slots", 1, 100);
  if (!next.ok()) return next.status();
  options.next_slots = static_cast<uint32_t>(*next);
  if (!f.preview) {
    if (!f.job.empty()) return absl::InvalidArgumentError("schedule: --job goes with --preview");
    return options;
  }
  if (f.job.empty()) return absl::InvalidArgumentError("schedule: --preview needs --job ID");
  options.preview_job = f.job;
  absl::StatusOr<uint64_t> hours =
      ParseFlagNumber("--hours", f.hours, "a number of hours", 1, uint64_t{24} * 7);
  if (!hours.ok()) return hours.status();
  options.preview_duration = absl::Hours(static_cast<int64_t>(*hours));
  return options;
}

}  // namespace gpuctl::cli
