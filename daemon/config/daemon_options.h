#ifndef GPUCTL_DAEMON_CONFIG_DAEMON_OPTIONS_H_
#define GPUCTL_DAEMON_CONFIG_DAEMON_OPTIONS_H_

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/log.h"
#include "daemon/core/daemon_core.h"
#include "daemon/core/token_scope.h"
#include "daemon/hostctx/recorder.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/kineto/kineto_bridge.h"
#include "daemon/kineto/kineto_server.h"
#include "daemon/metrics/metrics_options.h"
#include "daemon/s3/s3_config.h"
#include "daemon/s3/s3_store_options.h"
#include "daemon/scheduler/schedule_options.h"
#include "daemon/store/local_store.h"
#include "daemon/store/retention.h"

namespace gpuctl::daemon {

inline constexpr char kDefaultListenAddress[] = "127.0.0.1:7070";

// gpuctld's configuration: the defaults, each owned by the component it
// configures, then the configuration file (--config,
// daemon/config/daemon_config.h), then the command line.
inline constexpr uint32_t kDefaultListenSocketMode = 0600;

// One entry of auth.tokens: the token file and what its token may reach.
struct ScopedTokenOptions {
  TokenScope scope;
  std::string token_file;
};

inline constexpr absl::Duration kMaxClockOffset = absl::Hours(24);

struct DaemonOptions {
  std::string listen_address = kDefaultListenAddress;
  // The name the daemon calls itself by in every answer, manifest, trace
  // file name and object key (host_name, --host-name; CheckHostName).
  // Empty: gethostname() at start.
  std::string host_name;
  std::string socket_path = kDefaultSocketPath;
  std::string store_dir = kDefaultStoreDir;
  absl::Duration max_duration = kDefaultMaxDuration;
  absl::Duration start_delay = kDefaultStartDelay;
  absl::Duration result_grace = kDefaultResultGrace;
  // --clock-offset, for testing and diagnosis only: added to the clock the
  // schedule decides by (slots, window starts, `now` in GetSchedule), as if
  // this host's clock were off; trace windows keep the system clock. At
  // most kMaxClockOffset either way.
  absl::Duration clock_offset = absl::ZeroDuration();
  // After both servers are up, the bound gRPC address is written here.
  std::string ready_file;
  LogLevel log_level = LogLevel::kInfo;
  // Serve a non-loopback address without transport security.
  bool insecure = false;
  // TLS for the gRPC API (tls.cert/key/client_ca, --tls-*): PEM files read
  // at startup. cert and key together; client_ca requires client
  // certificates signed by it (mutual TLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // auth.token_file / --auth-token-file: every gpuctl.v1 call must carry
  // "authorization: Bearer <the file's token>".
  std::string auth_token_file;
  // auth.tokens: tokens that may reach only their scope's jobs, namespaces
  // or labels (daemon/core/token_scope.h); each file is read at startup.
  std::vector<ScopedTokenOptions> auth_tokens;
  // The largest result payload a process may hand over.
  uint64_t max_payload_bytes = kDefaultMaxPayloadBytes;
  // Trace data validated and converted at once (trace.max_ingest_bytes,
  // --max-ingest-bytes); 0: no cap.
  uint64_t max_ingest_bytes = kDefaultMaxIngestBytes;
  // The record buffer cap sent to processes; at most max_payload_bytes.
  uint64_t max_buffer_bytes = kDefaultMaxBufferBytes;
  RetentionPolicy retention = kDefaultRetention;
  // Set: traces go to this bucket, spooled in the local store until they
  // are uploaded. Validated (ValidateS3Config); credentials not resolved.
  std::optional<s3::S3Config> s3;
  // How traces move to the bucket (store.s3.upload_wait, keep_local,
  // upload_retry_max); used only with `s3`.
  s3::S3StoreOptions s3_store;
  // The IPC socket file's permission bits and group (ipc.socket_mode,
  // ipc.socket_group: a group name or gid as written, "" for none).
  uint32_t socket_mode = kDefaultSocketMode;
  std::string socket_group;
  // With `listen: unix:PATH`: the gRPC socket file's permission bits and
  // group (listen_mode, listen_group), its only access control. Default:
  // the daemon's user alone.
  uint32_t listen_mode = kDefaultListenSocketMode;
  std::string listen_group;
  // Registration churn (ipc.hello_rate, ipc.hello_burst): each uid may
  // send `hello_burst` Hellos at once, refilled at `hello_rate` a second;
  // hello_rate 0: no limit.
  uint32_t hello_rate = kDefaultHelloRate;
  uint32_t hello_burst = kDefaultHelloBurst;
  // ipc.allowed_uids as written (uids or user names); empty: any user.
  std::vector<std::string> allowed_users;
  // socket_group and allowed_users resolved against the group and user
  // databases by ParseDaemonFlags.
  std::optional<uint32_t> socket_gid;
  std::optional<uint32_t> listen_gid;
  std::vector<uint32_t> allowed_uids;
  // The metrics section (metrics.listen, --metrics-listen ...): gpuctld's
  // Prometheus listener, off unless listen is set; validated
  // (metrics::ValidateMetricsListen).
  metrics::MetricsOptions metrics;
  // The host_context section (host_context.frequency_hz, .max_samples,
  // .ring_pages):
  // the perf sampling of windows that ask for activities cpu / sched
  // (docs/host-context.md); the /proc it reads is the daemon's.
  hostctx::RecorderOptions host_context;
  // The schedule section: scheduled sampling rules and their budgets;
  // validated (scheduler::ValidateSchedule). No rules: no scheduled traces.
  scheduler::ScheduleOptions schedule;
  // kineto.dyno_rpc_listen: where gpuctld answers dynolog's RPC (`dyno
  // gputrace`, `dyno status`), a loopback HOST:PORT; empty: not served.
  std::string dyno_rpc_listen;
  // The kineto section: libkineto's daemon protocol (kineto.mode,
  // kineto.socket_dir) and its processes' limits; the bridge's hostname
  // and /proc come from the daemon's.
  kineto::KinetoServerOptions kineto_server;
  kineto::KinetoBridgeOptions kineto;
  // kineto.socket_dir; unset: "kineto" beside the IPC socket (so
  // /run/gpuctl/kineto, in the directory a DaemonSet shares with its pods);
  // "": no path socket.
  std::optional<std::string> kineto_socket_dir;
};

// The outcome of parsing: options to run with, or an exit code (0 after
// --help/--version or a --check-config that passed, 2 for a usage error)
// with the text already printed.
struct ParsedFlags {
  std::optional<DaemonOptions> options;
  int exit_code = 0;
};

// Parses gpuctld's flags, and the configuration file named by --config:
// flags given on the command line override the file's values. `socket_env`
// is $GPUCTL_SOCKET (null if unset), the socket path's default when set
// (the file and --socket override it). A bad flag or configuration file is
// exit code 2 with the reason on `err`.
ParsedFlags ParseDaemonFlags(int argc, const char* const* argv, const char* socket_env,
                             std::ostream& out, std::ostream& err);

// A positive human duration: "500ms", "2s", "10m", "1h30m".
absl::StatusOr<absl::Duration> ParseHumanDuration(const std::string& text);

// Splits "host:port" / "[v6]:port"; the port must be 0-65535. Or
// "unix:/absolute/path" (at most 107 bytes of path): a Unix socket.
// `secured`: TLS or --insecure, either of which allows a non-loopback host.
absl::Status ValidateListenAddress(const std::string& address, bool secured);

// True for an address only this host reaches: loopback ("127.x",
// "localhost", "[::1]") or a Unix socket.
bool IsLoopbackListen(const std::string& address);

// "unix:PATH" -> PATH; empty for a TCP address.
std::string UnixListenPath(const std::string& address);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONFIG_DAEMON_OPTIONS_H_
