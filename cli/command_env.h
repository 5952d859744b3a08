#ifndef GPUCTL_CLI_COMMAND_ENV_H_
#define GPUCTL_CLI_COMMAND_ENV_H_

#include <cstddef>
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/channel_security.h"
#include "cli/connection.h"
#include "cli/interrupt.h"
#include "gpuctl/v1/service.grpc.pb.h"

namespace gpuctl::cli {

// Everything a command takes from the outside world. main() fills it from
// the real process; tests inject streams and short timeouts.
struct CliEnv {
  std::ostream* out = &std::cout;
  std::ostream* err = &std::cerr;
  // Selects the live progress display on stderr.
  bool err_is_terminal = false;
  size_t terminal_columns = 80;
  // $GPUCTL_HOST; empty when unset.
  std::string env_host;
  // For timestamps in tables.
  absl::TimeZone time_zone = absl::UTCTimeZone();
  // How long to wait for the daemon to accept the connection.
  absl::Duration connect_timeout = absl::Seconds(5);
  // After a trace's window, a host that sends nothing for this long is
  // given up as timed out (a daemon reports a long ingest every 10s).
  absl::Duration trace_margin = absl::Seconds(60);
  // However busy the daemon, a host whose trace has not completed this long
  // after the window is given up as timed out.
  absl::Duration trace_result_limit = absl::Hours(1);
  // Deadline of the short calls (ps, traces, status).
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Deadline of one GetTrace transfer.
  absl::Duration download_timeout = absl::Minutes(30);
  // TLS and token settings from the environment (SecurityFromEnvironment);
  // flags win over them.
  SecurityFlags env_security;
  // What every connection uses: resolved from the flags and env_security
  // before a command runs.
  ChannelSecurity security;
  // Optional; Ctrl-C cancels a running trace or download.
  InterruptSource* interrupts = nullptr;
};

// Connects to `target` within env.connect_timeout (see Connect).
absl::StatusOr<std::unique_ptr<v1::Gpuctl::Stub>> OpenStub(const std::string& target,
                                                           const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_COMMAND_ENV_H_
