#include "daemon/runtime/daemon_options.h"

#include <CLI/CLI.hpp>
#include <ostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#ifndef GPUCTL_VERSION
#define GPUCTL_VERSION "0.0.0-dev"
#endif

namespace gpuctl::daemon {

absl::StatusOr<absl::Duration> ParseHumanDuration(const std::string& text) {
  // absl::ParseDuration also takes "inf", signs and bare "0"; only plain
  // positive amounts with units are meaningful here.
  bool shape_ok = !text.empty() && absl::ascii_isdigit(static_cast<unsigned char>(text[0]));
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.' &&
        !absl::ascii_isalpha(static_cast<unsigned char>(c))) {
      shape_ok = false;
    }
  }
  absl::Duration d;
  if (!shape_ok || !absl::ParseDuration(text, &d) || d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid duration \"", text, "\": expected a positive amount like 500ms, 2s, 10m, 1h"));
  }
  return d;
}

absl::Status ValidateListenAddress(const std::string& address, bool insecure) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid --listen \"", address, "\": expected HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid --listen \"", address, "\": port must be 0-65535"));
  }
  bool loopback = host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
  if (!loopback && !insecure) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to serve ", address,
        " without transport security; listen on a loopback address or pass --insecure"));
  }
  return absl::OkStatus();
}

namespace {

absl::Status ApplyDuration(const std::string& flag, const std::string& text, bool allow_zero,
                           absl::Duration* out) {
  if (text.empty()) return absl::OkStatus();
  if (allow_zero && (text == "0" || text == "0s" || text == "0ms")) {
    *out = absl::ZeroDuration();
    return absl::OkStatus();
  }
  absl::StatusOr<absl::Duration> d = ParseHumanDuration(text);
  if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", d.status().message()));
  *out = *d;
  return absl::OkStatus();
}

}  // namespace

ParsedFlags ParseDaemonFlags(int argc, const char* const* argv, const char* socket_env,
                             std::ostream& out, std::ostream& err) {
  DaemonOptions options;
  if (socket_env != nullptr && socket_env[0] != '\0') options.socket_path = socket_env;
  std::string max_duration, start_delay, result_grace, log_level = "info";
  bool version = false;

  CLI::App app("gpuctld: GPU profiling daemon", "gpuctld");
  app.add_option("--listen", options.listen_address, "gRPC address HOST:PORT (port 0: any)")
      ->capture_default_str();
  app.add_option(
      "--socket", options.socket_path,
      "IPC socket path (default $GPUCTL_SOCKET or " + std::string(kDefaultSocketPath) + ")");
  app.add_option("--store", options.store_dir, "trace store directory")->capture_default_str();
  app.add_option("--max-duration", max_duration, "longest capture window (default 10m)");
  app.add_option("--start-delay", start_delay, "delay before windows open (default 100ms)");
  app.add_option("--result-grace", result_grace, "wait for results after a window (default 10s)");
  app.add_option("--ready-file", options.ready_file,
                 "write the bound gRPC address here once serving");
  app.add_option("--log-level", log_level, "debug, info, warning or error")->capture_default_str();
  app.add_flag("--insecure", options.insecure,
               "allow a non-loopback --listen without transport security");
  app.add_flag("--version", version, "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return ParsedFlags{std::nullopt, code == 0 ? 0 : 2};
  }
  if (version) {
    out << "gpuctld " << GPUCTL_VERSION << "\n";
    return ParsedFlags{std::nullopt, 0};
  }
  absl::Status status = ApplyDuration("--max-duration", max_duration, false, &options.max_duration);
  if (status.ok()) status = ApplyDuration("--start-delay", start_delay, true, &options.start_delay);
  if (status.ok()) {
    status = ApplyDuration("--result-grace", result_grace, false, &options.result_grace);
  }
  if (status.ok() && !ParseLogLevel(log_level, &options.log_level)) {
    status = absl::InvalidArgumentError(absl::StrCat("--log-level: unknown level \"", log_level,
                                                     "\" (debug, info, warning, error)"));
  }
  if (status.ok()) status = ValidateListenAddress(options.listen_address, options.insecure);
  if (status.ok() && options.socket_path.empty()) {
    status = absl::InvalidArgumentError("--socket must not be empty");
  }
  if (status.ok() && options.store_dir.empty()) {
    status = absl::InvalidArgumentError("--store must not be empty");
  }
  if (!status.ok()) {
    err << "gpuctld: " << status.message() << "\n";
    return ParsedFlags{std::nullopt, 2};
  }
  return ParsedFlags{std::move(options), 0};
}

}  // namespace gpuctl::daemon
