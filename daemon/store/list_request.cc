#include "daemon/store/list_request.h"

#include "absl/strings/str_cat.h"
#include "daemon/common/trace_id.h"

namespace gpuctl::daemon {

absl::Status CheckListTracesRequest(const v1::ListTracesRequest& request) {
  if (request.page_size() < 0 || request.page_size() > kMaxListPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size ", request.page_size(), " is outside [0, ", kMaxListPageSize, "]"));
  }
  if (!request.page_token().empty() && !IsValidTraceId(request.page_token())) {
    return absl::InvalidArgumentError("invalid page token");
  }
  if (!v1::TriggerKind_IsValid(request.trigger())) {
    return absl::InvalidArgumentError(
        absl::StrCat("trigger ", request.trigger(), " is not a known trigger kind"));
  }
  return absl::OkStatus();
}

int32_t ListPageSize(const v1::ListTracesRequest& request) {
  return request.page_size() == 0 ? kDefaultListPageSize : request.page_size();
}

v1::TriggerKind TriggerKindOf(const v1::TraceManifest& manifest) {
  return manifest.trigger().kind() == v1::TRIGGER_KIND_UNSPECIFIED ? v1::TRIGGER_KIND_ON_DEMAND
                                                                   : manifest.trigger().kind();
}

bool ListFiltersPass(const v1::ListTracesRequest& request, const v1::TraceManifest& manifest) {
  if (!request.job_id().empty() && manifest.job_id() != request.job_id()) return false;
  return request.trigger() == v1::TRIGGER_KIND_UNSPECIFIED ||
         TriggerKindOf(manifest) == request.trigger();
}

}  // namespace gpuctl::daemon
