#include "daemon/s3/remote_trace.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/s3/trace_object_key.h"
#include "google/protobuf/util/json_util.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::s3 {
namespace {

// As the local store bounds a manifest it reads.
constexpr size_t kMaxManifestBytes = 16 << 20;
// Pages of 1000 keys: far more hosts than one trace has; bounds a listing
// that never ends.
constexpr int kMaxManifestPages = 100;

absl::StatusOr<v1::TraceManifest> ParseRemoteManifest(const std::string& json,
                                                      absl::string_view key,
                                                      absl::string_view trace_id) {
  v1::TraceManifest manifest;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (auto st = google::protobuf::util::JsonStringToMessage(json, &manifest, options); !st.ok()) {
    return absl::DataLossError(absl::StrCat("corrupt manifest s3 key ", key, ": ", st.ToString()));
  }
  if (manifest.trace_id() != trace_id) {
    return absl::DataLossError(absl::StrCat("manifest s3 key ", key, " is of trace \"",
                                            manifest.trace_id(), "\", not ", trace_id));
  }
  return manifest;
}

absl::StatusOr<v1::TraceManifest> ReadManifestObject(S3Client& client, absl::string_view trace_id,
                                                     absl::string_view file) {
  absl::StatusOr<std::string> key = TraceObjectKey(client.config().prefix, trace_id, file);
  if (!key.ok()) return key.status();
  std::string json;
  absl::Status st = client.GetObject(*key, [&json, &key](absl::string_view chunk) {
    if (json.size() + chunk.size() > kMaxManifestBytes) {
      return absl::DataLossError(
          absl::StrCat("manifest s3 key ", *key, " exceeds ", kMaxManifestBytes, " bytes"));
    }
    json.append(chunk.data(), chunk.size());
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return ParseRemoteManifest(json, *key, trace_id);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListRemoteManifests(S3Client& client,
                                                             absl::string_view trace_id) {
  absl::StatusOr<std::string> prefix = TraceObjectPrefix(client.config().prefix, trace_id);
  if (!prefix.ok()) return prefix.status();
  ListObjectsRequest request;
  request.prefix = absl::StrCat(*prefix, layout::kMetadataDir, "/");
  std::vector<std::string> names;
  for (int page = 0; page < kMaxManifestPages; ++page) {
    absl::StatusOr<ListObjectsResult> listed = client.ListObjects(request);
    if (!listed.ok()) return listed.status();
    for (const ObjectSummary& object : listed->objects) {
      if (!absl::StartsWith(object.key, *prefix)) continue;
      absl::string_view name = absl::string_view(object.key).substr(prefix->size());
      if (!layout::ManifestPathHost(name).empty()) names.emplace_back(name);
    }
    if (listed->next_continuation_token.empty()) return names;
    request.continuation_token = std::move(listed->next_continuation_token);
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("listing ", request.prefix, " took over ", kMaxManifestPages, " pages"));
}

absl::StatusOr<v1::TraceManifest> ReadRemoteManifest(S3Client& client, absl::string_view trace_id,
                                                     absl::string_view preferred) {
  absl::StatusOr<std::vector<std::string>> names = ListRemoteManifests(client, trace_id);
  if (!names.ok()) return names.status();
  if (names->empty()) {
    absl::StatusOr<v1::TraceManifest> legacy =
        ReadManifestObject(client, trace_id, layout::kLegacyManifestName);
    if (absl::IsNotFound(legacy.status())) {
      return absl::NotFoundError(absl::StrCat("no trace ", trace_id, " in the bucket"));
    }
    return legacy;
  }
  const bool has_preferred = std::find(names->begin(), names->end(), preferred) != names->end();
  return ReadManifestObject(client, trace_id, has_preferred ? preferred : names->front());
}

absl::StatusOr<std::vector<std::pair<std::string, v1::TraceManifest>>> ReadRemoteManifests(
    S3Client& client, absl::string_view trace_id) {
  absl::StatusOr<std::vector<std::string>> names = ListRemoteManifests(client, trace_id);
  if (!names.ok()) return names.status();
  if (names->empty()) names->emplace_back(layout::kLegacyManifestName);
  std::vector<std::pair<std::string, v1::TraceManifest>> out;
  out.reserve(names->size());
  for (std::string& name : *names) {
    absl::StatusOr<v1::TraceManifest> manifest = ReadManifestObject(client, trace_id, name);
    if (absl::IsNotFound(manifest.status()) && name == layout::kLegacyManifestName) {
      return absl::NotFoundError(absl::StrCat("no trace ", trace_id, " in the bucket"));
    }
    if (!manifest.ok()) return manifest.status();
    out.emplace_back(std::move(name), *std::move(manifest));
  }
  return out;
}

}  // namespace gpuctl::s3
