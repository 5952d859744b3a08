// The kineto section: what gpuctld serves to PyTorch's profiler and its
// tools: libkineto's daemon protocol and dynolog's RPC (daemon/kineto).
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/config/config_schema.h"
#include "daemon/kineto/dyno_rpc_listen.h"
#include "daemon/kineto/kineto_bridge.h"
#include "daemon/kineto/kineto_server.h"

namespace gpuctl::daemon {
namespace {

constexpr uint64_t kMaxKinetoProcesses = 100000;
constexpr uint64_t kMinKinetoBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxKinetoBytes = uint64_t{64} << 30;
// sun_path holds 107 bytes; "/dynolog" and kineto's client names
// ("/dynoconfigclient" and a 36-byte uuid) must fit after the directory.
constexpr size_t kMaxSocketDirBytes = 107 - 54;
constexpr absl::Duration kMaxPollPeriod = absl::Minutes(10);
constexpr uint64_t kMaxWarmupSecs = 600;

absl::Status ReadMode(const ConfigValue& v, DaemonOptions* o) {
  absl::StatusOr<std::string> text = v.String();
  if (!text.ok()) return text.status();
  absl::StatusOr<kineto::KinetoMode> mode = kineto::ParseKinetoMode(*text);
  if (!mode.ok()) return v.Error(mode.status().message());
  o->kineto_server.mode = *mode;
  return absl::OkStatus();
}

absl::Status ReadSocketDir(const ConfigValue& v, DaemonOptions* o) {
  absl::StatusOr<std::string> dir = v.String();
  if (!dir.ok()) return dir.status();
  if (!dir->empty() &&
      (dir->front() != '/' || dir->size() > kMaxSocketDirBytes || dir->back() == '/')) {
    return v.Error(absl::StrCat("must be an absolute directory of at most ", kMaxSocketDirBytes,
                                " bytes without a trailing slash (kineto's socket names follow "
                                "it in a 108-byte address), or \"\" for no path socket"));
  }
  o->kineto_socket_dir = *std::move(dir);
  return absl::OkStatus();
}

absl::Status ReadBytes(const ConfigValue& v, uint64_t* out) {
  absl::StatusOr<uint64_t> size = v.Size();
  if (!size.ok()) return size.status();
  if (*size < kMinKinetoBytes || *size > kMaxKinetoBytes) {
    return v.Error("must be 1MiB to 64GiB");
  }
  *out = *size;
  return absl::OkStatus();
}

constexpr ConfigKey kKinetoKeys[] = {
    {.name = "mode", .read = ReadMode},
    {.name = "dyno_rpc_listen",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<std::string> listen = v.String();
           if (!listen.ok()) return listen.status();
           if (absl::Status s = CheckDynoRpcListen(*listen); !s.ok()) return v.Error(s.message());
           o->dyno_rpc_listen = *std::move(listen);
           return absl::OkStatus();
         }},
    {.name = "socket_dir", .read = ReadSocketDir},
    {.name = "max_processes",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<uint64_t> n = v.Count(1, kMaxKinetoProcesses);
           if (!n.ok()) return n.status();
           o->kineto.max_processes = *n;
           return absl::OkStatus();
         }},
    {.name = "max_trace_bytes",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadBytes(v, &o->kineto.max_trace_bytes); }},
    {.name = "max_total_bytes",
     .read = [](const ConfigValue& v,
                DaemonOptions* o) { return ReadBytes(v, &o->kineto.max_total_bytes); }},
    {.name = "poll_period",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<absl::Duration> d = v.Duration(ZeroDuration::kRefused);
           if (!d.ok()) return d.status();
           if (*d < absl::Milliseconds(100) || *d > kMaxPollPeriod) {
             return v.Error("must be 100ms to 10m");
           }
           o->kineto.poll_period = *d;
           return absl::OkStatus();
         }},
    {.name = "warmup",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<absl::Duration> d = v.Duration(ZeroDuration::kAllowed);
           if (!d.ok()) return d.status();
           if (*d % absl::Seconds(1) != absl::ZeroDuration() ||
               *d > absl::Seconds(kMaxWarmupSecs)) {
             return v.Error("must be whole seconds, 0s to 10m (ACTIVITIES_WARMUP_PERIOD_SECS)");
           }
           o->kineto.warmup_secs = static_cast<int32_t>(absl::ToInt64Seconds(*d));
           return absl::OkStatus();
         }},
};

}  // namespace

absl::Span<const ConfigKey> KinetoConfigKeys() { return kKinetoKeys; }

}  // namespace gpuctl::daemon
