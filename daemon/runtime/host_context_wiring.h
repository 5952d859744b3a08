#ifndef GPUCTL_DAEMON_RUNTIME_HOST_CONTEXT_WIRING_H_
#define GPUCTL_DAEMON_RUNTIME_HOST_CONTEXT_WIRING_H_

#include <memory>

#include "daemon/core/host_context.h"
#include "daemon/hostctx/host_context_service.h"

namespace gpuctl::daemon {

// The core's HostContextSource over daemon/hostctx's service: the same
// calls, the events handed over as they are.
class HostContextWiring final : public HostContextSource {
 public:
  explicit HostContextWiring(hostctx::HostContextService* service) : service_(service) {}
  void Start(Key key, int32_t pid, HostContextWanted wanted) override;
  void Finish(Key key, Done done) override;

 private:
  hostctx::HostContextService* const service_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RUNTIME_HOST_CONTEXT_WIRING_H_
