#ifndef GPUCTL_DAEMON_IPC_STEP_COUNTER_PAGE_H_
#define GPUCTL_DAEMON_IPC_STEP_COUNTER_PAGE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/core/steps.h"
#include "daemon/ipc/unix_socket.h"

namespace gpuctl::daemon {

// Checks a step counter descriptor received with a Hello from an untrusted
// peer and maps it read-only (proto/gpuctl/v1/step_page.h). Refuses
// (INVALID_ARGUMENT, with the reason) anything but a memfd of exactly
// kStepPageBytes sealed against shrink, grow and further sealing: without
// those seals the peer could shrink the file under the mapping and fault
// the daemon. Always closes `fd`; the returned view owns the mapping and
// unmaps it when destroyed. Its Read() loads the fields with relaxed atomic
// loads and interprets them with InterpretStepPage.
absl::StatusOr<std::unique_ptr<StepCounterView>> MapStepCounterPage(UniqueFd fd);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_IPC_STEP_COUNTER_PAGE_H_
