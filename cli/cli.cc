#include "cli/cli.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cli/analyze_command.h"
#include "cli/channel_security.h"
#include "cli/command_flags.h"
#include "cli/connection.h"
#include "cli/doctor_command.h"
#include "cli/download.h"
#include "cli/exit_codes.h"
#include "cli/flag_number.h"
#include "cli/flag_suggestion.h"
#include "cli/format.h"
#include "cli/list_commands.h"
#include "cli/ps_command.h"
#include "cli/schedule_command.h"
#include "cli/trace_command.h"

#ifndef GPUCTL_VERSION
#define GPUCTL_VERSION "unknown"
#endif

namespace gpuctl::cli {
namespace {

constexpr char kUsageHint[] = "Run 'gpuctl help' or 'gpuctl COMMAND --help' for usage.\n";

// Flags as parsed, before validation.
struct Flags {
  // Single-host commands (traces, get, status).
  std::string host;
  bool json = false;
  std::string job_id;
  std::string trigger;
  std::string trace_id;
  std::string output_root = kDefaultOutputRoot;
  std::string limit;
  bool bucket = false;
  std::string days;
  std::vector<std::string> files;
  // Fleet commands (trace, ps).
  FleetFlags fleet;
  SelectorFlags selector;
  TraceFlags trace;
  PsFlags ps;
  ScheduleFlags schedule;
  // Every command that talks to gpuctld.
  SecurityFlags security;
  // `doctor`.
  std::string doctor_pid;
  std::string doctor_socket;
  // `help COMMAND`.
  std::string help_command;
  // `analyze`.
  AnalyzeFlags analyze;
};

void AddHostFlags(CLI::App* cmd, Flags& flags, bool with_json) {
  cmd->add_option("--host", flags.host,
                  "gpuctld address, HOST[:PORT] (default $GPUCTL_HOST, else 127.0.0.1:7070)");
  if (with_json) cmd->add_flag("--json", flags.json, "Print machine-readable JSON");
}

// Thrown out of a subcommand's validation as a usage error.
CLI::ValidationError UsageError(const std::string& message) {
  return CLI::ValidationError(message);
}

template <typename T>
T OrUsageError(absl::StatusOr<T> value) {
  if (!value.ok()) throw UsageError(std::string(value.status().message()));
  return *std::move(value);
}

std::string ResolveTarget(const Flags& flags, const CliEnv& env) {
  std::string host = !flags.host.empty()     ? flags.host
                     : !env.env_host.empty() ? env.env_host
                                             : std::string(kDefaultHost);
  absl::StatusOr<std::string> target = NormalizeHost(host);
  if (!target.ok()) throw UsageError(absl::StrCat("--host: ", target.status().message()));
  return *target;
}

// The parser; `run` is set by the chosen subcommand's callback.
struct Parser {
  CLI::App app{"gpuctl: trigger and collect GPU traces from gpuctld", "gpuctl"};
  Flags flags;
  std::function<int()> run;
  // `analyze` fetches from gpuctld (--trace-id, --since) rather than
  // reading local files only.
  bool analyze_fetches = false;
};

void DefineCommands(Parser& p, const CliEnv& env) {
  Flags& f = p.flags;
  p.app.set_version_flag("--version", absl::StrCat("gpuctl ", GPUCTL_VERSION));
  p.app.require_subcommand(1);
  p.app.fallthrough(false);

  CLI::App* trace = p.app.add_subcommand(
      "trace", "Capture a trace of the selected processes on one or many hosts");
  AddFleetFlags(trace, f.fleet);
  AddSelectorFlags(trace, f.selector, /*for_trace=*/true);
  AddTraceFlags(trace, f.trace);
  trace->callback([&p, &env] {
    TraceOptions options = OrUsageError(
        ValidateTraceFlags(p.flags.trace, p.flags.fleet, p.flags.selector, env.env_host));
    p.run = [options, &env] { return RunTrace(options, env); };
  });

  CLI::App* ps = p.app.add_subcommand("ps", "List the processes attached to gpuctld on each host");
  AddFleetFlags(ps, f.fleet);
  AddSelectorFlags(ps, f.selector, /*for_trace=*/false);
  ps->add_flag("--json", f.ps.json, "Print one machine-readable JSON document");
  ps->add_flag("--all", f.ps.all,
               "Also list the processes gpuctld refused lately (uid not allowed, bad Hello...)");
  ps->add_flag("--wide", f.ps.wide, "Show whole command lines (still redacted)");
  ps->callback([&p, &env] {
    PsOptions options =
        OrUsageError(ValidatePsFlags(p.flags.ps, p.flags.fleet, p.flags.selector, env.env_host));
    p.run = [options, &env] { return RunPs(options, env); };
  });

  CLI::App* schedule = p.app.add_subcommand(
      "schedule", "Show each host's sampling schedule, or preview which slots capture a job");
  AddFleetFlags(schedule, f.fleet);
  AddScheduleFlags(schedule, f.schedule);
  schedule->callback([&p, &env] {
    ScheduleCommandOptions options =
        OrUsageError(ValidateScheduleFlags(p.flags.schedule, p.flags.fleet, env.env_host));
    p.run = [options, &env] { return RunSchedule(options, env); };
  });

  CLI::App* traces = p.app.add_subcommand("traces", "List stored traces, newest first");
  AddHostFlags(traces, f, true);
  traces->add_option("--job", f.job_id, "Only traces of this job");
  CLI::Option* traces_trigger = traces->add_option(
      "--trigger", f.trigger, "Only traces of this trigger: scheduled, anomaly or on-demand");
  CLI::Option* traces_limit = traces->add_option("--limit", f.limit, "At most this many traces");
  traces->add_flag("--bucket", f.bucket,
                   "The traces in the daemon's S3 bucket, every daemon's (pods gone included)");
  CLI::Option* traces_days =
      traces->add_option("--days", f.days, "With --bucket: days back, today included (default 7)");
  traces->callback([&p, &env, traces_limit, traces_trigger, traces_days] {
    std::string target = ResolveTarget(p.flags, env);
    TracesQuery query{.job_id = p.flags.job_id, .bucket = p.flags.bucket};
    if (traces_trigger->count() > 0)
      query.trigger = OrUsageError(ParseTriggerKind(p.flags.trigger));
    if (traces_limit->count() > 0) {
      query.limit = static_cast<int>(OrUsageError(ParseFlagNumber(
          "--limit", p.flags.limit, "a number of traces", 1, std::numeric_limits<int32_t>::max())));
    }
    if (traces_days->count() > 0) {
      if (!p.flags.bucket) throw UsageError("--days goes with --bucket");
      query.bucket_days = static_cast<uint32_t>(
          OrUsageError(ParseFlagNumber("--days", p.flags.days, "a number of days", 1, 366)));
    }
    p.run = [target, query, &p, &env] { return RunTraces(target, query, p.flags.json, env); };
  });

  CLI::App* get = p.app.add_subcommand("get", "Download a stored trace");
  AddHostFlags(get, f, false);
  get->add_option("trace_id", f.trace_id, "Trace id")->required();
  get->add_option("-o,--output", f.output_root, "Download directory")->capture_default_str();
  get->add_option("--file", f.files, "Only this file of the trace (repeatable)")
      ->allow_extra_args(false);
  get->add_flag("--bucket", f.bucket,
                "From the daemon's S3 bucket: every host's part of the trace (pods gone included)");
  get->callback([&p, &env] {
    std::string target = ResolveTarget(p.flags, env);
    if (absl::Status s = ValidateTraceId("get", p.flags.trace_id); !s.ok()) {
      throw UsageError(std::string(s.message()));
    }
    for (const std::string& name : p.flags.files) {
      if (!IsSafeName(name))
        throw UsageError(absl::StrCat("--file: invalid file name \"", name, "\""));
    }
    if (p.flags.output_root.empty()) throw UsageError("-o: empty directory");
    p.run = [target, &p, &env] {
      return RunGet(target, p.flags.trace_id, p.flags.files, p.flags.output_root, p.flags.bucket,
                    env);
    };
  });

  CLI::App* status = p.app.add_subcommand("status", "Show gpuctld's status");
  AddHostFlags(status, f, true);
  status->callback([&p, &env] {
    std::string target = ResolveTarget(p.flags, env);
    p.run = [target, &p, &env] { return RunStatus(target, p.flags.json, env); };
  });

  CLI::App* doctor = p.app.add_subcommand(
      "doctor", "Explain why a process of this host is or is not attached to gpuctld");
  AddHostFlags(doctor, f, true);
  doctor->add_option("--pid", f.doctor_pid, "The process to examine (as this host sees it)")
      ->required();
  doctor->add_option("--socket", f.doctor_socket,
                     "gpuctld's IPC socket as this host names it (default: what gpuctld "
                     "reports)");
  doctor->callback([&p, &env] {
    DoctorOptions options;
    options.target = ResolveTarget(p.flags, env);
    options.pid = static_cast<int>(OrUsageError(ParseFlagNumber(
        "--pid", p.flags.doctor_pid, "a process id", 1, std::numeric_limits<int32_t>::max())));
    options.socket = p.flags.doctor_socket;
    options.json = p.flags.json;
    p.run = [options, &env] { return RunDoctor(options, env); };
  });

  for (CLI::App* cmd : {trace, ps, schedule, traces, get, status, doctor}) {
    AddSecurityFlags(cmd, f.security);
  }

  CLI::App* analyze = p.app.add_subcommand(
      "analyze", "Diagnose trace files or trace directories: where the GPU time goes");
  AddAnalyzeFlags(analyze, f.analyze);
  AddSecurityFlags(analyze, f.security);
  analyze->callback([&p, &env] {
    AnalyzeCommandOptions options =
        OrUsageError(ValidateAnalyzeFlags(p.flags.analyze, env.env_host));
    p.analyze_fetches = options.Fetches();
    p.run = [options, &env] { return RunAnalyze(options, env); };
  });

  CLI::App* help =
      p.app.add_subcommand("help", "Show this help, or a command's: gpuctl help COMMAND");
  help->add_option("command", f.help_command, "The command to describe");
  help->callback([&p, &env] {
    CLI::App* described = &p.app;
    if (!p.flags.help_command.empty()) {
      try {
        described = p.app.get_subcommand(p.flags.help_command);
      } catch (const CLI::OptionNotFound&) {
        throw UsageError(absl::StrCat("help: unknown command \"", p.flags.help_command, "\""));
      }
    }
    p.run = [&p, &env, described] {
      // What `gpuctl COMMAND --help` prints. App::help() would describe the
      // selected subcommand, "help" itself.
      *env.out << (described == &p.app ? p.app.get_formatter()->make_help(
                                             &p.app, "gpuctl", CLI::AppFormatMode::Normal)
                                       : described->help(p.app.get_name()));
      return kExitOk;
    };
  });
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const CliEnv& given_env) {
  // Commands read the connection settings resolved after parsing.
  CliEnv env = given_env;
  Parser parser;
  DefineCommands(parser, env);
  // CLI11 would only say "A subcommand is required".
  if (!args.empty() && args[0].size() > 1 && args[0][0] == '-' &&
      parser.app.get_option_no_throw(std::string(args[0].substr(0, args[0].find('=')))) ==
          nullptr) {
    *env.err << "gpuctl: unknown flag " << Printable(args[0].substr(0, 64))
             << "; a command comes first: gpuctl COMMAND [FLAGS]\n"
             << kUsageHint;
    return kExitUsage;
  }
  if (!args.empty() && !args[0].empty() && args[0][0] != '-') {
    try {
      parser.app.get_subcommand(args[0]);
    } catch (const CLI::OptionNotFound&) {
      *env.err << "gpuctl: unknown command \"" << args[0] << "\"\n" << kUsageHint;
      return kExitUsage;
    }
  }
  try {
    // CLI11 consumes a vector from the back.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    parser.app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return parser.app.exit(e, *env.out, *env.err);
  } catch (const CLI::CallForAllHelp& e) {
    return parser.app.exit(e, *env.out, *env.err);
  } catch (const CLI::CallForVersion& e) {
    return parser.app.exit(e, *env.out, *env.err);
  } catch (const CLI::ExtrasError&) {
    std::vector<CLI::App*> chosen = parser.app.get_subcommands();
    const CLI::App& command = chosen.empty() ? parser.app : *chosen.front();
    *env.err << "gpuctl: " << UnexpectedArgumentMessage(command, args) << "\n" << kUsageHint;
    return kExitUsage;
  } catch (const CLI::ParseError& e) {
    *env.err << "gpuctl: " << e.what() << "\n";
    *env.err << kUsageHint;
    return kExitUsage;
  }
  if (!parser.run) return kExitUsage;
  // Neither talks to gpuctld.
  if (parser.app.got_subcommand("help") ||
      (parser.app.got_subcommand("analyze") && !parser.analyze_fetches)) {
    return parser.run();
  }
  absl::StatusOr<ChannelSecurity> security =
      ResolveChannelSecurity(parser.flags.security, env.env_security);
  if (!security.ok()) {
    *env.err << "gpuctl: " << security.status().message() << "\n" << kUsageHint;
    return kExitUsage;
  }
  env.security = *std::move(security);
  return parser.run();
}

int Main(int argc, char** argv) {
  CliEnv env;
  env.err_is_terminal = isatty(STDERR_FILENO) == 1;
  if (winsize ws{};
      env.err_is_terminal && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    env.terminal_columns = ws.ws_col;
  }
  if (const char* host = std::getenv("GPUCTL_HOST"); host != nullptr) env.env_host = host;
  env.env_security = SecurityFromEnvironment();
  env.time_zone = absl::LocalTimeZone();
  absl::StatusOr<std::unique_ptr<SignalInterruptSource>> interrupts =
      SignalInterruptSource::Create();
  if (interrupts.ok()) env.interrupts = interrupts->get();
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  return RunCli(args, env);
}

}  // namespace gpuctl::cli
