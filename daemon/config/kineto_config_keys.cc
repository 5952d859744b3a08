// The kineto section: what gpuctld serves to PyTorch's profiler and its
// tools.
#include <string>

#include "daemon/config/config_schema.h"
#include "daemon/kineto/dyno_rpc_listen.h"

namespace gpuctl::daemon {
namespace {

constexpr ConfigKey kKinetoKeys[] = {
    {.name = "dyno_rpc_listen",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<std::string> listen = v.String();
           if (!listen.ok()) return listen.status();
           if (absl::Status s = CheckDynoRpcListen(*listen); !s.ok()) return v.Error(s.message());
           o->dyno_rpc_listen = *std::move(listen);
           return absl::OkStatus();
         }},
};

}  // namespace

absl::Span<const ConfigKey> KinetoConfigKeys() { return kKinetoKeys; }

}  // namespace gpuctl::daemon
