#ifndef GPUCTL_DAEMON_STORE_LIST_REQUEST_H_
#define GPUCTL_DAEMON_STORE_LIST_REQUEST_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::daemon {

// What every TraceStore's List takes of a ListTracesRequest, checked alike.
inline constexpr int32_t kDefaultListPageSize = 100;
inline constexpr int32_t kMaxListPageSize = 1000;

// INVALID_ARGUMENT for a page size outside [0, 1000], a page token that is
// not a trace id (the last one of the previous page) or an unknown trigger.
absl::Status CheckListTracesRequest(const v1::ListTracesRequest& request);

// The request's page size, its default for 0.
int32_t ListPageSize(const v1::ListTracesRequest& request);

// A manifest's trigger; one without was written before triggers were
// recorded, when every trace was on demand.
v1::TriggerKind TriggerKindOf(const v1::TraceManifest& manifest);

// Whether `manifest` passes the request's job and trigger filters.
bool ListFiltersPass(const v1::ListTracesRequest& request, const v1::TraceManifest& manifest);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_STORE_LIST_REQUEST_H_
