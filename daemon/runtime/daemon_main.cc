#include "daemon/runtime/daemon_main.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "daemon/common/log.h"
#include "daemon/common/posix_file.h"
#include "daemon/ipc/socket_access.h"
#include "daemon/rpc/transport_security.h"
#include "daemon/runtime/host_context_wiring.h"
#include "daemon/runtime/listen_probe.h"
#include "daemon/runtime/metrics_wiring.h"
#include "daemon/runtime/protobuf_log.h"
#include "daemon/store/local_store.h"

#ifdef GPUCTL_HAVE_GRPC_REFLECTION
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#endif

#ifndef GPUCTL_VERSION
#define GPUCTL_VERSION "0.0.0-dev"
#endif

namespace gpuctl::daemon {
namespace {

constexpr int kWorkerThreads = 2;
// Running Trace calls are cancelled after this; their results still land
// in the store if the workers finish them.
constexpr auto kGrpcShutdownGrace = std::chrono::seconds(2);
// How often the store's retention runs besides after each trace: what
// max_age needs.
constexpr absl::Duration kRetentionPeriod = absl::Minutes(1);
// The service's full name, as grpc.health.v1 and reflection name it.
constexpr char kGpuctlServiceName[] = "gpuctl.v1.Gpuctl";

// The daemon's name when none is configured.
std::string SystemHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown";
  return name;
}

// Writes `content` to `path` so that readers see all of it or nothing.
absl::Status WriteReadyFile(const std::string& path, const std::string& content) {
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return WriteFileAtomically(ParentDir(path), name, content, absl::StrCat(".", name, ".tmp-"),
                             0644);
}

// Applies the store's retention now, on a worker (it deletes files), and
// then every kRetentionPeriod. Called before the loop runs, then on it.
void ScheduleRetention(EventLoop* loop, Executor* worker, TraceStore* store) {
  worker->Run([store] { store->EnforceRetention(); });
  loop->PostDelayed(kRetentionPeriod,
                    [loop, worker, store] { ScheduleRetention(loop, worker, store); });
}

// "127.0.0.1:0" + 41234 -> "127.0.0.1:41234".
std::string BoundAddress(const std::string& listen, int port) {
  if (!UnixListenPath(listen).empty()) return listen;
  return absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
}

// "none", "bearer token", "bearer token + 2 scoped", "2 scoped tokens".
std::string AuthSummary(const DaemonOptions& options) {
  const size_t scoped = options.auth_tokens.size();
  if (options.auth_token_file.empty()) {
    return scoped == 0 ? "none" : absl::StrCat(scoped, " scoped token", scoped == 1 ? "" : "s");
  }
  return scoped == 0 ? "bearer token" : absl::StrCat("bearer token + ", scoped, " scoped");
}

// Reads auth.token_file and every auth.tokens file; no two may hold the
// same token (a scoped token equal to another would take its reach).
absl::StatusOr<std::unique_ptr<BearerTokenAuth>> ReadTokens(const DaemonOptions& options) {
  std::string unscoped;
  if (!options.auth_token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(options.auth_token_file);
    if (!token.ok()) return token.status();
    unscoped = *std::move(token);
  }
  std::vector<BearerTokenAuth::ScopedToken> scoped;
  for (const ScopedTokenOptions& t : options.auth_tokens) {
    absl::StatusOr<std::string> token = ReadTokenFile(t.token_file);
    if (!token.ok()) {
      return absl::Status(token.status().code(), absl::StrCat("auth.tokens \"", t.scope.name,
                                                              "\": ", token.status().message()));
    }
    bool taken = !unscoped.empty() && TokensEqual(*token, unscoped);
    for (const BearerTokenAuth::ScopedToken& other : scoped) {
      taken = taken || TokensEqual(*token, other.token);
    }
    if (taken) {
      return absl::InvalidArgumentError(
          absl::StrCat("auth.tokens \"", t.scope.name, "\": ", t.token_file,
                       " holds the same token as another token file; each token needs its own"));
    }
    scoped.push_back({t.scope, *std::move(token)});
  }
  return std::make_unique<BearerTokenAuth>(std::move(unscoped), std::move(scoped));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options) {
  std::unique_ptr<Daemon> daemon(new Daemon());
  if (absl::Status s = daemon->Init(options); !s.ok()) {
    daemon->Shutdown();
    return s;
  }
  return daemon;
}

void Daemon::StartHostContext(const hostctx::RecorderOptions& recorder,
                              const CoreOptions& core_options) {
  hostctx::HostContextServiceOptions options;
  options.recorder = recorder;
  options.recorder.sampler.proc_root = core_options.proc_root;
  absl::StatusOr<std::unique_ptr<hostctx::HostContextService>> service =
      hostctx::HostContextService::Create(options, &clock_);
  if (!service.ok()) {
    // Traces still run; those asking for host context say it is unavailable.
    LogWarning("host context disabled", {{"error", service.status().ToString()}});
    return;
  }
  host_context_ = *std::move(service);
  host_context_source_ = std::make_unique<HostContextWiring>(host_context_.get());
}

absl::Status Daemon::Init(const DaemonOptions& options) {
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  if (!loop.ok()) return loop.status();
  loop_ = std::move(*loop);
  metrics_ = MakeDaemonMetrics(options.metrics);
  host_name_ = options.host_name.empty() ? SystemHostName() : options.host_name;
  if (absl::Status s = OpenStore(options); !s.ok()) return s;
  worker_ = std::make_unique<ThreadPoolExecutor>(kWorkerThreads);

  CoreOptions core_options;
  core_options.hostname = host_name_;
  core_options.daemon_version = GPUCTL_VERSION;
  core_options.max_duration = options.max_duration;
  core_options.start_delay = options.start_delay;
  core_options.result_grace = options.result_grace;
  core_options.max_payload_bytes = options.max_payload_bytes;
  core_options.max_ingest_bytes = options.max_ingest_bytes;
  core_options.max_buffer_bytes = options.max_buffer_bytes;
  core_options.socket_path = options.socket_path;
  core_options.allowed_uids = options.allowed_uids;

  IpcServerOptions ipc_options;
  ipc_options.socket_path = options.socket_path;
  ipc_options.daemon_version = GPUCTL_VERSION;
  ipc_options.max_payload_bytes = core_options.max_payload_bytes;
  ipc_options.hello_rate = options.hello_rate;
  ipc_options.hello_burst = options.hello_burst;
  ipc_options.access.mode = options.socket_mode;
  if (options.socket_gid.has_value()) ipc_options.access.group = *options.socket_gid;
  absl::StatusOr<std::unique_ptr<IpcServer>> ipc = IpcServer::Create(ipc_options, loop_.get());
  if (!ipc.ok()) return ipc.status();
  ipc_ = std::move(*ipc);

  peers_.set_library(ipc_.get());
  if (absl::Status s = CreateKinetoServer(options); !s.ok()) return s;

  // The listen address is reported by GetStatus, so bind before the core.
  if (absl::Status s = StartGrpc(options); !s.ok()) return s;
  core_options.listen_address = grpc_address_;
  if (options.schedule.enabled()) {
    background_worker_ = std::make_unique<ThreadPoolExecutor>(
        options.schedule.worker_threads,
        ThreadPriority{.nice = options.schedule.worker_nice, .idle = options.schedule.worker_idle});
  }
  StartHostContext(options.host_context, core_options);
  core_ = DaemonCore::Create(core_options,
                             DaemonCore::Deps{.clock = &clock_,
                                              .loop = loop_.get(),
                                              .worker = worker_.get(),
                                              .store = store_.get(),
                                              .peers = &peers_,
                                              .background_worker = background_worker_.get(),
                                              .metrics = metrics_.get(),
                                              .host_context = host_context_source_.get()});
  service_->set_core(core_.get());
  if (absl::Status s = ipc_->Start(core_.get()); !s.ok()) return s;
  if (absl::Status s = StartKineto(options); !s.ok()) return s;
  ScheduleRetention(loop_.get(), worker_.get(), store_.get());
  StartDynoRpc(options);
  if (options.schedule.enabled()) {
    schedule_clock_ = std::make_unique<OffsetClock>(&clock_, options.clock_offset);
    if (options.clock_offset != absl::ZeroDuration()) {
      LogWarning("the schedule runs on a shifted clock (--clock-offset, for testing only)",
                 {{"offset", absl::FormatDuration(options.clock_offset)}});
    }
    schedule_ = std::make_unique<scheduler::ScheduleDriver>(
        options.schedule,
        scheduler::ScheduleDriver::Deps{
            .clock = schedule_clock_.get(),
            .loop = loop_.get(),
            .core = core_.get(),
            .free_store_bytes = [dir = options.store_dir]() -> uint64_t {
              struct statvfs fs = {};
              if (statvfs(dir.c_str(), &fs) != 0) return UINT64_MAX;
              return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
            },
            .on_decision =
                [metrics = metrics_.get()](absl::string_view rule, scheduler::SlotOutcome outcome) {
                  if (metrics != nullptr) {
                    metrics->OnScheduleDecision(rule, scheduler::SlotOutcomeLabel(outcome));
                  }
                }});
    // Before the loop runs: the calls it holds see the schedule.
    service_->set_schedule(schedule_.get());
    loop_->Post([this] { schedule_->Start(); });
  }
  // Calls that arrived since the gRPC server started waited in the loop's
  // queue; they run from here on, with the core in place.
  loop_thread_ = std::thread([this] { loop_->Run(); });
  if (metrics_ != nullptr) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> server = StartMetricsServer(
        options.metrics, *metrics_, {loop_.get(), core_.get(), local_store_, s3_store_, &clock_});
    if (!server.ok()) return server.status();
    metrics_server_ = *std::move(server);
  }

  if (!options.ready_file.empty()) {
    if (absl::Status s = WriteReadyFile(options.ready_file, grpc_address_); !s.ok()) return s;
  }
  SetServing(true);
  LogInfo("gpuctld ready",
          {{"grpc", grpc_address_},
           {"host", host_name_},
           {"tls", options.tls_cert.empty()        ? "off"
                   : options.tls_client_ca.empty() ? "on"
                                                   : "mutual"},
           {"auth", AuthSummary(options)},
           {"socket", options.socket_path},
           {"metrics", metrics_address().empty() ? "off" : metrics_address()},
           {"store", s3_store_ != nullptr ? s3_store_->Location("") : options.store_dir},
           {"version", GPUCTL_VERSION}});
  return absl::OkStatus();
}

absl::Status Daemon::CreateKinetoServer(const DaemonOptions& options) {
  kineto::KinetoServerOptions server_options = options.kineto_server;
  server_options.socket_dir = options.kineto_socket_dir.has_value()
                                  ? *options.kineto_socket_dir
                                  : absl::StrCat(ParentDir(options.socket_path), "/kineto");
  absl::StatusOr<std::unique_ptr<kineto::KinetoServer>> server =
      kineto::KinetoServer::Create(server_options, loop_.get());
  if (!server.ok()) return server.status();
  kineto_server_ = *std::move(server);
  return absl::OkStatus();
}

absl::Status Daemon::StartKineto(const DaemonOptions& options) {
  kineto::KinetoBridgeOptions bridge_options = options.kineto;
  bridge_options.hostname = host_name_;
  kineto_proc_ = std::make_unique<kineto::ProcfsKinetoReader>(bridge_options.proc_root);
  kineto_ = std::make_unique<kineto::KinetoBridge>(
      bridge_options, kineto::KinetoBridge::Deps{.clock = &clock_,
                                                 .loop = loop_.get(),
                                                 .worker = worker_.get(),
                                                 .core = core_.get(),
                                                 .proc = kineto_proc_.get(),
                                                 .server = kineto_server_.get()});
  peers_.set_kineto(kineto_.get());
  const v1::KinetoBridgeStatus status = kineto_server_->Status();
  LogInfo("kineto bridge", {{"mode", status.mode()},
                            {"state", status.state()},
                            {"abstract_socket", status.abstract_socket() ? "true" : "false"},
                            {"socket", status.socket_path()},
                            {"reason", status.message()}});
  if (!kineto_server_->serving()) return absl::OkStatus();
  return kineto_server_->Start(kineto_.get());
}

absl::Status Daemon::OpenStore(const DaemonOptions& options) {
  // The daemon is the store's only writer: a trace left without a manifest
  // by a previous run is never completed, and goes.
  LocalStoreOptions store_options;
  store_options.retention = options.retention;
  store_options.clock = &clock_;
  store_options.remove_incomplete = true;
  store_options.host = host_name_;
  absl::StatusOr<std::unique_ptr<LocalTraceStore>> store =
      LocalTraceStore::Create(options.store_dir, store_options);
  if (!store.ok()) return store.status();
  local_store_ = store->get();
  if (!options.s3.has_value()) {
    store_ = std::move(*store);
    return absl::OkStatus();
  }
  // Credentials are resolved here: none found is a reason not to start.
  absl::StatusOr<std::unique_ptr<s3::S3Client>> client = s3::S3Client::Create(*options.s3);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("store.s3: ", client.status().message()));
  }
  const s3::S3Config& config = (*client)->config();
  LogInfo("storing traces in S3",
          {{"endpoint", config.endpoint},
           {"bucket", config.bucket},
           {"prefix", config.prefix},
           {"credentials", (*client)->credentials_source()},
           {"spool", options.store_dir},
           {"upload_wait", absl::FormatDuration(options.s3_store.upload_wait)},
           {"keep_local", options.s3_store.keep_local ? "true" : "false"},
           {"upload_retry_max", absl::FormatDuration(options.s3_store.upload_retry_max)},
           {"shutdown_wait", absl::FormatDuration(options.s3_store.shutdown_wait)}});
  s3::TraceUploaderDeps deps;
  deps.clock = &clock_;
  CountUploads(deps, metrics_.get());
  s3::S3StoreOptions s3_options = options.s3_store;
  // The name the trace files carry, so the sweep of orphaned uploads at
  // start picks exactly this host's.
  s3_options.hostname = host_name_;
  std::unique_ptr<s3::S3TraceStore> s3_store = s3::S3TraceStore::Create(
      *std::move(store), *std::move(client), std::move(s3_options), std::move(deps));
  s3_store_ = s3_store.get();
  store_ = std::move(s3_store);
  return absl::OkStatus();
}

void Daemon::StartDynoRpc(const DaemonOptions& options) {
  if (options.dyno_rpc_listen.empty()) return;
  dyno_handler_ = std::make_unique<DynoRpcHandler>(core_.get(), GPUCTL_VERSION);
  DynoRpcOptions dyno_options;
  dyno_options.listen = options.dyno_rpc_listen;
  absl::StatusOr<std::unique_ptr<DynoRpcServer>> server = DynoRpcServer::Create(
      dyno_options, loop_.get(), [handler = dyno_handler_.get()](absl::string_view request) {
        return handler->Handle(request);
      });
  if (!server.ok()) {
    // dyno's tools then reach whichever daemon holds the port, if any;
    // gpuctl's own API is unaffected.
    LogWarning("not serving dynolog's RPC", {{"error", server.status().ToString()}});
    return;
  }
  dyno_rpc_ = *std::move(server);
  LogInfo("serving dynolog's RPC", {{"address", dyno_rpc_->address()}});
}

absl::Status Daemon::StartGrpc(const DaemonOptions& options) {
  // The core comes later (set_core): the service touches it only from the
  // loop, which starts after the core exists.
  service_ = std::make_unique<GrpcService>(nullptr, loop_.get(), store_.get(), worker_.get());
  service_->set_clock(&clock_);
  grpc::EnableDefaultHealthCheckService(true);
#ifdef GPUCTL_HAVE_GRPC_REFLECTION
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
#endif
  // Files are read now: a bad certificate or token file stops the start.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(
      ServerTlsFiles{options.tls_cert, options.tls_key, options.tls_client_ca});
  if (!credentials.ok()) return credentials.status();
  if (!options.auth_token_file.empty() || !options.auth_tokens.empty()) {
    absl::StatusOr<std::unique_ptr<BearerTokenAuth>> auth = ReadTokens(options);
    if (!auth.ok()) return auth.status();
    auth_ = *std::move(auth);
    service_->set_auth(auth_.get());
    if (options.tls_cert.empty() && !IsLoopbackListen(options.listen_address)) {
      LogWarning("the bearer token crosses the network in plain text: serve TLS too",
                 {{"listen", options.listen_address}});
    }
  }
  const std::string unix_path = UnixListenPath(options.listen_address);
  SocketAccess unix_access;
  unix_access.mode = options.listen_mode;
  if (options.listen_gid.has_value()) unix_access.group = *options.listen_gid;
  if (!unix_path.empty()) {
    // gRPC replaces whatever file is at the path: a live daemon's socket
    // must stay, and only a socket may go.
    if (absl::Status s = PrepareSocketDirectory(ParentDir(unix_path), unix_access, geteuid());
        !s.ok()) {
      return s;
    }
    if (absl::Status s = PrepareUnixListenPath(unix_path); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", options.listen_address,
                                                 ": ", s.message(),
                                                 "; stop it or pick another --listen"));
    }
  }
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT on Linux by default: a second daemon would then
  // share the port and take half of the calls.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(options.listen_address, *credentials, &port);
  builder.RegisterService(service_.get());
  AddCallCounter(builder, metrics_.get());
  reflection_v1_ = std::make_unique<ReflectionV1Service>(std::vector<std::string>{
      kGpuctlServiceName,
      "grpc.health.v1.Health",
      kReflectionV1ServiceName,
#ifdef GPUCTL_HAVE_GRPC_REFLECTION
      "grpc.reflection.v1alpha.ServerReflection",
#endif
  });
  builder.RegisterService(reflection_v1_.get());
  {
    // A Unix socket is born owner-only, then given its mode and group: no
    // one else connects in between.
    const mode_t previous = unix_path.empty() ? 0 : umask(0177);
    grpc_server_ = builder.BuildAndStart();
    if (!unix_path.empty()) umask(previous);
  }
  if (grpc_server_ != nullptr && !unix_path.empty()) {
    if (absl::Status s = ApplySocketAccess(unix_path, unix_access); !s.ok()) return s;
    unix_listen_path_ = unix_path;
  }
  if (grpc_server_ == nullptr || port == 0) {
    const std::string reason = ListenFailureReason(options.listen_address);
    if (reason == kAddressInUse) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve gRPC on ", options.listen_address,
                       ": address in use (another gpuctld or another program listens there); "
                       "stop it or pick another --listen"));
    }
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", options.listen_address,
                                               ": ", reason.empty() ? "not available" : reason));
  }
  grpc_address_ = BoundAddress(options.listen_address, port);
  // Calls wait in the loop's queue until the core is in place: not serving
  // until then (Init sets SERVING last).
  SetServing(false);
  return absl::OkStatus();
}

void Daemon::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health =
      grpc_server_ == nullptr ? nullptr : grpc_server_->GetHealthCheckService();
  if (health == nullptr) return;
  // "" is the whole server; the service by name for clients that ask so.
  health->SetServingStatus(serving);
  health->SetServingStatus(kGpuctlServiceName, serving);
}

void Daemon::Shutdown() {
  if (stopped_) return;
  stopped_ = true;
  // store.s3.shutdown_wait counts from here: pending uploads go at once.
  if (s3_store_ != nullptr) s3_store_->BeginShutdown();
  // Scrapes read the core through the loop: the listener goes first.
  metrics_server_.reset();
  // gRPC calls complete through the loop, so it must run while the gRPC
  // server shuts down, even when Init failed before starting it.
  if (!loop_thread_.joinable() && loop_ != nullptr && core_ != nullptr) {
    loop_thread_ = std::thread([this] { loop_->Run(); });
  }
  if (grpc_server_ != nullptr) {
    // Health watchers and load balancers hear NOT_SERVING before the
    // server stops taking calls.
    SetServing(false);
    grpc_server_->Shutdown(std::chrono::system_clock::now() + kGrpcShutdownGrace);
  }
  if (loop_thread_.joinable()) {
    loop_->Post([this] {
      if (service_ != nullptr) service_->set_schedule(nullptr);
      schedule_.reset();
      dyno_rpc_.reset();
      if (ipc_ != nullptr) ipc_->Stop();
      if (kineto_server_ != nullptr) kineto_server_->Stop();
      loop_->Quit();
    });
    loop_thread_.join();
  }
  // Its recordings end with it; what it still hands back goes to the
  // stopped loop.
  if (host_context_ != nullptr) host_context_->Shutdown();
  // Workers may still post to the (stopped) loop; the core must outlive
  // them. Since BeginShutdown none waits for an upload, and the traces
  // they complete join the flush.
  if (worker_ != nullptr) worker_->Shutdown();
  if (background_worker_ != nullptr) background_worker_->Shutdown();
  // Uploads what is pending within shutdown_wait; the rest stays marked.
  if (s3_store_ != nullptr) s3_store_->Shutdown();
  grpc_server_.reset();
  if (!unix_listen_path_.empty()) unlink(unix_listen_path_.c_str());
  service_.reset();
  reflection_v1_.reset();
  schedule_.reset();
  dyno_rpc_.reset();
  dyno_handler_.reset();
  kineto_.reset();
  core_.reset();
  host_context_source_.reset();
  host_context_.reset();
  peers_.set_library(nullptr);
  peers_.set_kineto(nullptr);
  kineto_server_.reset();
  ipc_.reset();
  s3_store_ = nullptr;
  store_.reset();
  local_store_ = nullptr;
  worker_.reset();
  background_worker_.reset();
  loop_.reset();
  metrics_.reset();
  LogInfo("gpuctld stopped");
}

Daemon::~Daemon() { Shutdown(); }

int RunDaemon(int argc, char** argv) {
  RouteProtobufLogs();
  ParsedFlags flags =
      ParseDaemonFlags(argc, argv, std::getenv("GPUCTL_SOCKET"), std::cout, std::cerr);
  if (!flags.options.has_value()) return flags.exit_code;
  SetMinLogLevel(flags.options->log_level);

  // Block the stop signals in every thread (threads inherit the mask) and
  // take them synchronously below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(*flags.options);
  if (!daemon.ok()) {
    LogError("gpuctld cannot start", {{"error", daemon.status().ToString()}});
    return 1;
  }
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  LogInfo("gpuctld stopping", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  // A second signal during shutdown ends the process at once.
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  (*daemon)->Shutdown();
  return 0;
}

}  // namespace gpuctl::daemon
