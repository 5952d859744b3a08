#ifndef GPUCTL_CLI_COMMAND_FLAGS_H_
#define GPUCTL_CLI_COMMAND_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/host_list.h"
#include "cli/ps_command.h"
#include "cli/schedule_command.h"
#include "cli/selector.h"
#include "cli/trace_command.h"

namespace gpuctl::cli {

// The flags of the fleet commands (`trace`, `ps`) as typed, and their
// validation into command options. Validation errors are INVALID_ARGUMENT
// naming the flag: usage errors (exit 2), found before anything is sent.

struct FleetFlags {
  HostFlags hosts;
  std::string parallel = std::to_string(kDefaultParallel);
  std::string host_timeout = "10s";
};

struct TraceFlags {
  std::string duration;
  std::string trace_id;
  std::vector<std::string> activities;
  std::vector<std::string> kineto_options;
  std::string unwind;  // --unwind: fp or dwarf
  std::string output_root = kDefaultOutputRoot;
  bool no_download = false;
  bool json = false;
  std::string start_delay;
  std::string max_start_skew = "50ms";
  std::string iterations;
  std::string start_step;
  std::string step_roundup = "1";
  std::string step_margin = "auto";
  // Which were given, for the rules between flags.
  CLI::Option* duration_option = nullptr;
  CLI::Option* start_delay_option = nullptr;
  CLI::Option* max_start_skew_option = nullptr;
  CLI::Option* iterations_option = nullptr;
  CLI::Option* start_step_option = nullptr;
  CLI::Option* step_roundup_option = nullptr;
  CLI::Option* step_margin_option = nullptr;
};

struct PsFlags {
  bool json = false;
  bool all = false;   // --all: also the refused attachments
  bool wide = false;  // --wide: whole command lines
};

struct ScheduleFlags {
  bool json = false;
  std::string next = "3";
  bool preview = false;
  std::string job;
  std::string hours = "24";
};

void AddFleetFlags(CLI::App* command, FleetFlags& flags);
void AddScheduleFlags(CLI::App* command, ScheduleFlags& flags);
void AddSelectorFlags(CLI::App* command, SelectorFlags& flags, bool for_trace);
void AddTraceFlags(CLI::App* command, TraceFlags& flags);

// A trace id as gpuctld makes them (a lowercase UUIDv7); `what` names the
// flag or argument in the message.
absl::Status ValidateTraceId(absl::string_view what, const std::string& trace_id);

absl::StatusOr<TraceOptions> ValidateTraceFlags(const TraceFlags& trace, const FleetFlags& fleet,
                                                const SelectorFlags& selector,
                                                absl::string_view env_host);
absl::StatusOr<PsOptions> ValidatePsFlags(const PsFlags& ps, const FleetFlags& fleet,
                                          const SelectorFlags& selector,
                                          absl::string_view env_host);

// --preview needs --job; --job and --hours only with --preview; --next in
// [1, 100]; --hours in [1, 168].
absl::StatusOr<ScheduleCommandOptions> ValidateScheduleFlags(const ScheduleFlags& schedule,
                                                             const FleetFlags& fleet,
                                                             absl::string_view env_host);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_COMMAND_FLAGS_H_
