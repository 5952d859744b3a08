#include "daemon/config/daemon_options.h"

#include <CLI/CLI.hpp>
#include <ostream>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/config/config_values.h"
#include "daemon/config/daemon_config.h"

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

namespace {

constexpr char kInsecureRefusal[] = " without transport security; listen on a loopback address or ";

// The shape of HOST:PORT, whatever the host, or of unix:PATH; an error
// says what is wrong.
absl::Status CheckListenShape(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) {
    // sockaddr_un.sun_path holds 108 bytes with the terminating NUL.
    constexpr size_t kMaxUnixPath = 107;
    const std::string path = UnixListenPath(address);
    if (path.empty() || path[0] != '/') {
      return absl::InvalidArgumentError("expected unix:/absolute/path");
    }
    if (path.size() > kMaxUnixPath) {
      return absl::InvalidArgumentError(
          absl::StrCat("a Unix socket path has at most ", kMaxUnixPath, " bytes"));
    }
    if (path.find('\0') != std::string::npos || path.back() == '/') {
      return absl::InvalidArgumentError("expected unix:/absolute/path");
    }
    return absl::OkStatus();
  }
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError("expected HOST:PORT");
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError("port must be 0-65535");
  }
  return absl::OkStatus();
}

}  // namespace

std::string UnixListenPath(const std::string& address) {
  if (!absl::StartsWith(address, "unix:")) return "";
  std::string path = address.substr(5);
  // unix:///run/x is unix:/run/x.
  if (absl::StartsWith(path, "//")) path = path.substr(2);
  return path;
}

bool IsLoopbackListen(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return true;
  std::string host = address.substr(0, address.rfind(':'));
  return host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

absl::Status ValidateListenAddress(const std::string& address, bool secured) {
  if (absl::Status s = CheckListenShape(address); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid --listen \"", address, "\": ", s.message()));
  }
  if (!IsLoopbackListen(address) && !secured) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to serve ", address, kInsecureRefusal,
                     "serve TLS (--tls-cert, --tls-key), or pass --insecure"));
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

// Stores a parsed flag value, or says which flag was wrong.
template <typename T, typename U>
absl::Status ApplyParsed(const char* flag, absl::StatusOr<T> value, U* out) {
  if (!value.ok())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", value.status().message()));
  *out = *std::move(value);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ParseIngestBytes(const std::string& text) {
  absl::StatusOr<uint64_t> bytes = ParseByteSize(text);
  if (bytes.ok() && *bytes != 0 && (*bytes < kMinIngestBytes || *bytes > kMaxIngestBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        FormatByteSize(*bytes), " is out of range (0 for no cap, or ",
        FormatByteSize(kMinIngestBytes), " to ", FormatByteSize(kMaxIngestBytes), ")"));
  }
  return bytes;
}

absl::StatusOr<uint32_t> ParseBoundedCount(const std::string& text, uint32_t min, uint32_t max) {
  absl::StatusOr<uint64_t> value = ParseConfigCount(text);
  if (!value.ok()) return value.status();
  if (*value < min || *value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(*value, " is out of range (", min, " to ", max, ")"));
  }
  return static_cast<uint32_t>(*value);
}

absl::StatusOr<uint32_t> ParseHelloRate(const std::string& text) {
  return ParseBoundedCount(text, 0, kMaxHelloRate);
}

absl::StatusOr<uint32_t> ParseHelloBurst(const std::string& text) {
  return ParseBoundedCount(text, 1, kMaxHelloBurst);
}

// The command line as given: empty strings and false for flags not given.
struct CommandLine {
  std::string config;
  std::string check_config;
  std::string listen, host_name, socket, store, ready_file, log_level;
  std::string max_duration, start_delay, result_grace;
  std::string clock_offset;
  std::string store_max_bytes, store_max_age, store_max_count;
  std::string max_ingest_bytes;
  std::string socket_mode, socket_group;
  std::string listen_mode, listen_group;
  std::string hello_rate, hello_burst;
  std::string tls_cert, tls_key, tls_client_ca, auth_token_file;
  std::string metrics_listen;
  bool metrics_allow_insecure = false;
  bool insecure = false;
  bool version = false;
};

void DefineFlags(CLI::App& app, CommandLine& cl) {
  app.add_option("--config", cl.config,
                 "YAML configuration file; flags given here override its values");
  app.add_option("--check-config", cl.check_config,
                 "check this configuration file, with the other flags given, as at startup; "
                 "print the first error (exit 2) or OK (exit 0) and start nothing")
      ->excludes("--config");
  app.add_option("--listen", cl.listen,
                 absl::StrCat("gRPC address HOST:PORT (port 0: any) or unix:/PATH (default ",
                              kDefaultListenAddress, ")"));
  app.add_option("--listen-mode", cl.listen_mode,
                 "with --listen unix:PATH: the socket's permission bits in octal (default 0600)");
  app.add_option("--listen-group", cl.listen_group,
                 "with --listen unix:PATH: group (name or gid) given to the socket: its members "
                 "may use the API");
  app.add_option("--host-name", cl.host_name,
                 "the name this daemon reports, stores traces and names files under "
                 "(default: the system's host name)");
  app.add_option(
      "--socket", cl.socket,
      absl::StrCat("IPC socket path (default $GPUCTL_SOCKET or ", kDefaultSocketPath, ")"));
  app.add_option("--socket-mode", cl.socket_mode,
                 "IPC socket permission bits in octal (default 0660)");
  app.add_option("--socket-group", cl.socket_group,
                 "group (name or gid) given to the IPC socket: its members may attach");
  app.add_option("--store", cl.store,
                 absl::StrCat("trace store directory (default ", kDefaultStoreDir, ")"));
  app.add_option("--store-max-bytes", cl.store_max_bytes,
                 "keep at most this many bytes of traces, e.g. 50GiB; 0: no limit (default 50GiB)");
  app.add_option("--store-max-age", cl.store_max_age,
                 "delete traces older than this, e.g. 30d; 0: no limit (default 30d)");
  app.add_option("--store-max-count", cl.store_max_count,
                 "keep at most this many traces; 0: no limit (default 100000)");
  app.add_option("--max-duration", cl.max_duration, "longest capture window (default 10m)");
  app.add_option(
      "--start-delay", cl.start_delay,
      "delay before windows open when a request names no start instant, at most 1h (default "
      "100ms)");
  app.add_option("--result-grace", cl.result_grace,
                 "wait for results after a window (default 10s)");
  app.add_option("--max-ingest-bytes", cl.max_ingest_bytes,
                 "trace data converted at once, e.g. 512MiB; results beyond it wait; 0: no "
                 "cap (default 512MiB)");
  app.add_option("--hello-rate", cl.hello_rate,
                 absl::StrCat("Hellos a second each uid may send once its burst is spent; 0: no "
                              "limit (default ",
                              kDefaultHelloRate, ")"));
  app.add_option(
      "--hello-burst", cl.hello_burst,
      absl::StrCat("Hellos each uid may send at once (default ", kDefaultHelloBurst, ")"));
  app.add_option("--ready-file", cl.ready_file, "write the bound gRPC address here once serving");
  app.add_option("--log-level", cl.log_level, "debug, info, warning or error (default info)");
  app.add_option("--tls-cert", cl.tls_cert, "serve gRPC over TLS with this PEM certificate chain");
  app.add_option("--tls-key", cl.tls_key, "the PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", cl.tls_client_ca,
                 "require client certificates signed by this PEM CA (mutual TLS)");
  app.add_option("--auth-token-file", cl.auth_token_file,
                 "require \"authorization: Bearer <token>\" on every call; the file (mode 0600) "
                 "holds the token");
  app.add_flag("--insecure", cl.insecure,
               "allow a non-loopback --listen without transport security");
  app.add_option("--metrics-listen", cl.metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics (IPv4; port 0: any; "
                 "default: off)");
  app.add_flag("--metrics-allow-insecure", cl.metrics_allow_insecure,
               "allow a non-loopback --metrics-listen (plain HTTP, no authentication)");
  app.add_flag("--version", cl.version, "print the version and exit");
  // Not in --help: it makes the schedule wrong on purpose.
  app.add_option("--clock-offset", cl.clock_offset,
                 "testing and diagnosis only: shift the schedule's clock, e.g. -3s")
      ->group("");
}

// "-3s", "250ms", "0": a signed duration within kMaxClockOffset.
absl::StatusOr<absl::Duration> ParseClockOffset(const std::string& text) {
  const bool negative = !text.empty() && text[0] == '-';
  const std::string magnitude = negative ? text.substr(1) : text;
  absl::Duration d = absl::ZeroDuration();
  if (magnitude != "0" && magnitude != "0s") {
    absl::StatusOr<absl::Duration> parsed = ParseHumanDuration(magnitude);
    if (!parsed.ok()) return parsed.status();
    d = *parsed;
  }
  if (d > kMaxClockOffset) {
    return absl::InvalidArgumentError(
        absl::StrCat(text, " is more than ", absl::FormatDuration(kMaxClockOffset), " either way"));
  }
  return negative ? -d : d;
}

// Replaces the values of the flags that were given.
absl::Status ApplyFlags(const CLI::App& app, const CommandLine& cl, DaemonOptions* o) {
  auto given = [&app](const char* flag) { return app.count(flag) > 0; };
  if (given("--listen")) o->listen_address = cl.listen;
  if (given("--socket")) o->socket_path = cl.socket;
  if (given("--store")) o->store_dir = cl.store;
  if (given("--ready-file")) o->ready_file = cl.ready_file;
  if (given("--insecure")) o->insecure = cl.insecure;
  if (given("--metrics-listen")) o->metrics.listen = cl.metrics_listen;
  if (given("--metrics-allow-insecure")) o->metrics.allow_insecure = cl.metrics_allow_insecure;
  absl::Status s;
  for (auto [flag, value, out] :
       {std::tuple{"--tls-cert", &cl.tls_cert, &o->tls_cert},
        std::tuple{"--tls-key", &cl.tls_key, &o->tls_key},
        std::tuple{"--tls-client-ca", &cl.tls_client_ca, &o->tls_client_ca},
        std::tuple{"--auth-token-file", &cl.auth_token_file, &o->auth_token_file}}) {
    if (!given(flag)) continue;
    if (value->empty() && s.ok()) s = absl::InvalidArgumentError(absl::StrCat(flag, " is empty"));
    *out = *value;
  }
  if (given("--max-duration")) {
    s = ApplyDuration("--max-duration", cl.max_duration, false, &o->max_duration);
  }
  if (s.ok() && given("--start-delay")) {
    s = ApplyDuration("--start-delay", cl.start_delay, true, &o->start_delay);
    if (s.ok() && o->start_delay > kMaxStartDelay) {
      s = absl::InvalidArgumentError(
          absl::StrCat("--start-delay: ", absl::FormatDuration(o->start_delay), " is more than ",
                       absl::FormatDuration(kMaxStartDelay)));
    }
  }
  if (s.ok() && given("--clock-offset")) {
    s = ApplyParsed("--clock-offset", ParseClockOffset(cl.clock_offset), &o->clock_offset);
  }
  if (s.ok() && given("--result-grace")) {
    s = ApplyDuration("--result-grace", cl.result_grace, false, &o->result_grace);
  }
  if (s.ok() && given("--store-max-bytes")) {
    s = ApplyParsed("--store-max-bytes", ParseByteSize(cl.store_max_bytes),
                    &o->retention.max_bytes);
  }
  if (s.ok() && given("--store-max-age")) {
    s = ApplyParsed("--store-max-age", ParseConfigDuration(cl.store_max_age),
                    &o->retention.max_age);
  }
  if (s.ok() && given("--store-max-count")) {
    s = ApplyParsed("--store-max-count", ParseConfigCount(cl.store_max_count),
                    &o->retention.max_count);
  }
  if (s.ok() && given("--max-ingest-bytes")) {
    s = ApplyParsed("--max-ingest-bytes", ParseIngestBytes(cl.max_ingest_bytes),
                    &o->max_ingest_bytes);
  }
  if (s.ok() && given("--hello-rate")) {
    s = ApplyParsed("--hello-rate", ParseHelloRate(cl.hello_rate), &o->hello_rate);
  }
  if (s.ok() && given("--hello-burst")) {
    s = ApplyParsed("--hello-burst", ParseHelloBurst(cl.hello_burst), &o->hello_burst);
  }
  if (s.ok() && given("--host-name")) {
    s = CheckHostName(cl.host_name);
    if (!s.ok()) s = absl::InvalidArgumentError(absl::StrCat("--host-name: ", s.message()));
    o->host_name = cl.host_name;
  }
  if (s.ok() && given("--socket-mode")) {
    s = ApplyParsed("--socket-mode", ParseSocketMode(cl.socket_mode), &o->socket_mode);
  }
  if (s.ok() && given("--socket-group")) {
    s = CheckGroupSpelling(cl.socket_group);
    if (!s.ok()) s = absl::InvalidArgumentError(absl::StrCat("--socket-group: ", s.message()));
    o->socket_group = cl.socket_group;
  }
  if (s.ok() && given("--listen-mode")) {
    s = ApplyParsed("--listen-mode", ParseSocketMode(cl.listen_mode), &o->listen_mode);
  }
  if (s.ok() && given("--listen-group")) {
    s = CheckGroupSpelling(cl.listen_group);
    if (!s.ok()) s = absl::InvalidArgumentError(absl::StrCat("--listen-group: ", s.message()));
    o->listen_group = cl.listen_group;
  }
  if (s.ok() && given("--log-level") && !ParseLogLevel(cl.log_level, &o->log_level)) {
    s = absl::InvalidArgumentError(absl::StrCat("--log-level: unknown level \"", cl.log_level,
                                                "\" (debug, info, warning, error)"));
  }
  return s;
}

// Looks up ipc.socket_group and ipc.allowed_uids in the group and user
// databases, reporting a missing name at the file's line or the flag.
absl::Status ResolveAccessIds(const CLI::App& app, const ConfigLocations& file, DaemonOptions& o) {
  o.socket_gid.reset();
  if (!o.socket_group.empty()) {
    absl::StatusOr<gid_t> gid = ResolveGroup(o.socket_group);
    if (!gid.ok()) {
      return app.count("--socket-group") > 0
                 ? absl::InvalidArgumentError(
                       absl::StrCat("--socket-group: ", gid.status().message()))
                 : file.Error("ipc.socket_group", gid.status().message());
    }
    o.socket_gid = *gid;
  }
  o.listen_gid.reset();
  if (!o.listen_group.empty()) {
    absl::StatusOr<gid_t> gid = ResolveGroup(o.listen_group);
    if (!gid.ok()) {
      return app.count("--listen-group") > 0 ? absl::InvalidArgumentError(absl::StrCat(
                                                   "--listen-group: ", gid.status().message()))
                                             : file.Error("listen_group", gid.status().message());
    }
    o.listen_gid = *gid;
  }
  o.allowed_uids.clear();
  for (const std::string& user : o.allowed_users) {
    absl::StatusOr<uid_t> uid = ResolveUser(user);
    if (!uid.ok()) return file.Error("ipc.allowed_uids", uid.status().message());
    o.allowed_uids.push_back(*uid);
  }
  return absl::OkStatus();
}

// The metrics listener once the flags are merged: an address from the file
// is reported at its line.
absl::Status ValidateMetrics(const CLI::App& app, const DaemonOptions& o,
                             const ConfigLocations& file) {
  if (app.count("--metrics-listen") > 0 && o.metrics.listen.empty()) {
    return absl::InvalidArgumentError("--metrics-listen is empty");
  }
  if (o.metrics.listen.empty()) return absl::OkStatus();
  absl::Status s = metrics::ValidateMetricsListen(o.metrics.listen, o.metrics.allow_insecure);
  if (s.ok() || app.count("--metrics-listen") > 0 || file.Line("metrics.listen") == 0) return s;
  return file.Error("metrics.listen", s.message());
}

// Checks the merged options (resolving names); a value from the file is
// reported at its line.
absl::Status ValidateMerged(const CLI::App& app, DaemonOptions& o, const ConfigLocations& file) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate and its key (--tls-cert and --tls-key, or tls.cert and "
        "tls.key)");
  }
  if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca (tls.client_ca) requires TLS: give --tls-cert and --tls-key too");
  }
  const bool secured = o.insecure || !o.tls_cert.empty();
  if (app.count("--listen") > 0 || file.Line("listen") == 0) {
    if (absl::Status s = ValidateListenAddress(o.listen_address, secured); !s.ok()) return s;
  } else {
    if (absl::Status s = CheckListenShape(o.listen_address); !s.ok()) {
      return file.Error("listen", absl::StrCat("\"", o.listen_address, "\": ", s.message()));
    }
    if (!IsLoopbackListen(o.listen_address) && !secured) {
      return file.Error(
          "listen",
          absl::StrCat("refusing to serve ", o.listen_address, kInsecureRefusal,
                       "configure tls (cert, key), or set insecure: true (or pass --insecure)"));
    }
  }
  if (o.socket_path.empty()) return absl::InvalidArgumentError("--socket must not be empty");
  if (!UnixListenPath(o.listen_address).empty() &&
      UnixListenPath(o.listen_address) == o.socket_path) {
    return absl::InvalidArgumentError(
        absl::StrCat("the gRPC socket (--listen ", o.listen_address,
                     ") and the IPC socket (--socket) must be different files"));
  }
  if (absl::Status s = ValidateMetrics(app, o, file); !s.ok()) return s;
  if (absl::Status s = ResolveAccessIds(app, file, o); !s.ok()) return s;
  if (o.store_dir.empty()) return absl::InvalidArgumentError("--store must not be empty");
  return absl::OkStatus();
}

}  // namespace

ParsedFlags ParseDaemonFlags(int argc, const char* const* argv, const char* socket_env,
                             std::ostream& out, std::ostream& err) {
  CommandLine cl;
  CLI::App app("gpuctld: GPU profiling daemon", "gpuctld");
  DefineFlags(app, cl);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return ParsedFlags{std::nullopt, code == 0 ? 0 : 2};
  }
  if (cl.version) {
    out << "gpuctld " << GPUCTL_VERSION << "\n";
    return ParsedFlags{std::nullopt, 0};
  }
  DaemonOptions options;
  if (socket_env != nullptr && socket_env[0] != '\0') options.socket_path = socket_env;
  absl::Status status;
  ConfigLocations file;
  const bool check_only = app.count("--check-config") > 0;
  if (app.count("--config") > 0 || check_only) {
    const std::string& path = check_only ? cl.check_config : cl.config;
    absl::StatusOr<ConfigLocations> loaded =
        path.empty() ? absl::InvalidArgumentError(absl::StrCat(
                           check_only ? "--check-config" : "--config", " must not be empty"))
                     : LoadDaemonConfigFile(path, &options);
    if (loaded.ok()) {
      file = *std::move(loaded);
    } else {
      status = loaded.status();
    }
  }
  if (status.ok()) status = ApplyFlags(app, cl, &options);
  if (status.ok()) status = ValidateMerged(app, options, file);
  if (!status.ok()) {
    err << "gpuctld: " << status.message() << "\n";
    return ParsedFlags{std::nullopt, 2};
  }
  if (check_only) {
    out << "gpuctld: " << cl.check_config << ": OK\n";
    return ParsedFlags{std::nullopt, 0};
  }
  return ParsedFlags{std::move(options), 0};
}

}  // namespace gpuctl::daemon
