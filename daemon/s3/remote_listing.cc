#include "daemon/s3/remote_listing.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/common/log.h"
#include "daemon/common/trace_id.h"
#include "daemon/s3/remote_trace.h"
#include "daemon/s3/trace_object_key.h"
#include "daemon/store/list_request.h"

namespace gpuctl::s3 {
namespace {

// Pages of one day's listing at most (1000 traces each).
constexpr int kMaxDayPages = 100;

absl::Status CheckRequest(const v1::ListTracesRequest& request) {
  if (absl::Status st = daemon::CheckListTracesRequest(request); !st.ok()) return st;
  if (request.bucket_days() > kMaxBucketDays) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_days ", request.bucket_days(), " is above ", kMaxBucketDays));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListBucketDay(S3Client& client, absl::CivilDay day) {
  const std::string prefix = TraceDayPrefix(client.config().prefix, day);
  std::vector<std::string> ids;
  ListObjectsRequest list;
  list.prefix = prefix;
  list.delimiter = "/";
  for (int page = 0; page < kMaxDayPages; ++page) {
    absl::StatusOr<ListObjectsResult> listed = client.ListObjects(list);
    if (!listed.ok()) return listed.status();
    for (const std::string& common : listed->common_prefixes) {
      absl::string_view id = common;
      if (absl::ConsumePrefix(&id, prefix) && absl::ConsumeSuffix(&id, "/") && IsValidTraceId(id)) {
        ids.emplace_back(id);
      }
    }
    if (listed->next_continuation_token.empty()) break;
    list.continuation_token = listed->next_continuation_token;
  }
  std::sort(ids.begin(), ids.end(), std::greater<>());
  return ids;
}

absl::StatusOr<v1::ListTracesResponse> ListBucketTraces(S3Client& client,
                                                        const v1::ListTracesRequest& request,
                                                        absl::string_view preferred,
                                                        absl::Time now) {
  if (absl::Status st = CheckRequest(request); !st.ok()) return st;
  const int page_size = daemon::ListPageSize(request);
  const uint32_t days = request.bucket_days() == 0 ? kDefaultBucketDays : request.bucket_days();
  const absl::CivilDay today = absl::ToCivilDay(now, absl::UTCTimeZone());
  const absl::CivilDay oldest = today - (days - 1);
  const std::string& after = request.page_token();
  // Ids are time-ordered: a page token's day is where the next page starts.
  absl::CivilDay day = today;
  if (!after.empty()) {
    day = std::min(
        day, absl::ToCivilDay(absl::FromUnixMillis(TraceIdUnixMillis(after)), absl::UTCTimeZone()));
  }
  v1::ListTracesResponse response;
  for (; day >= oldest; --day) {
    absl::StatusOr<std::vector<std::string>> ids = ListBucketDay(client, day);
    if (!ids.ok()) return ids.status();
    for (const std::string& id : *ids) {
      if (!after.empty() && id >= after) continue;
      absl::StatusOr<v1::TraceManifest> manifest = ReadRemoteManifest(client, id, preferred);
      if (!manifest.ok()) {
        LogWarning("skipping a trace in the bucket",
                   {{"trace_id", id}, {"error", manifest.status().message()}});
        continue;
      }
      if (!daemon::ListFiltersPass(request, *manifest)) continue;
      manifest->set_trace_id(id);
      *response.add_traces() = *std::move(manifest);
      if (response.traces_size() == page_size) {
        response.set_next_page_token(id);
        return response;
      }
    }
  }
  return response;
}

}  // namespace gpuctl::s3
