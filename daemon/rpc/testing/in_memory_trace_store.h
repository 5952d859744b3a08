#ifndef GPUCTL_DAEMON_RPC_TESTING_IN_MEMORY_TRACE_STORE_H_
#define GPUCTL_DAEMON_RPC_TESTING_IN_MEMORY_TRACE_STORE_H_

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/store/trace_store.h"

namespace gpuctl::daemon::testing {

// A TraceStore in memory, for adapter tests. List returns every manifest
// (no paging) unless `list_error` is set.
class InMemoryTraceStore final : public TraceStore {
 public:
  std::string Location(absl::string_view trace_id) const override {
    return absl::StrCat("mem://", trace_id);
  }
  std::string ManifestName() const override { return "_gpuctl/mem.json"; }
  absl::Status PutFile(absl::string_view trace_id, absl::string_view name,
                       absl::string_view data) override {
    absl::MutexLock lock(&mu_);
    files_[std::string(trace_id)][std::string(name)] = std::string(data);
    return absl::OkStatus();
  }
  absl::Status PutManifest(const v1::TraceManifest& manifest) override {
    absl::MutexLock lock(&mu_);
    manifests_[manifest.trace_id()] = manifest;
    files_[manifest.trace_id()][ManifestName()] =
        absl::StrCat("{\"traceId\": \"", manifest.trace_id(), "\"}");
    return absl::OkStatus();
  }
  absl::StatusOr<v1::TraceManifest> GetManifest(absl::string_view trace_id) override {
    absl::MutexLock lock(&mu_);
    auto it = manifests_.find(std::string(trace_id));
    if (it == manifests_.end()) return absl::NotFoundError(absl::StrCat("no trace ", trace_id));
    return it->second;
  }
  absl::StatusOr<v1::ListTracesResponse> List(const v1::ListTracesRequest& request) override {
    absl::MutexLock lock(&mu_);
    if (!list_error_.ok()) return list_error_;
    v1::ListTracesResponse response;
    for (const auto& [id, manifest] : manifests_) *response.add_traces() = manifest;
    return response;
  }
  absl::StatusOr<std::unique_ptr<TraceFileReader>> Open(absl::string_view trace_id,
                                                        absl::string_view name) override {
    absl::MutexLock lock(&mu_);
    auto trace = files_.find(std::string(trace_id));
    if (trace == files_.end()) return absl::NotFoundError(absl::StrCat("no trace ", trace_id));
    auto file = trace->second.find(std::string(name));
    if (file == trace->second.end()) {
      return absl::NotFoundError(absl::StrCat("no file ", name, " in trace ", trace_id));
    }
    return std::unique_ptr<TraceFileReader>(new Reader(file->second));
  }
  void set_list_error(absl::Status status) {
    absl::MutexLock lock(&mu_);
    list_error_ = std::move(status);
  }

 private:
  class Reader final : public TraceFileReader {
   public:
    explicit Reader(std::string data) : data_(std::move(data)) {}
    uint64_t size() const override { return data_.size(); }
    absl::Status Read(size_t max_bytes, std::string* out) override {
      size_t n = std::min(max_bytes, data_.size() - pos_);
      out->assign(data_, pos_, n);
      pos_ += n;
      return absl::OkStatus();
    }

   private:
    std::string data_;
    size_t pos_ = 0;
  };

  absl::Mutex mu_;
  std::map<std::string, v1::TraceManifest> manifests_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, std::string>> files_ ABSL_GUARDED_BY(mu_);
  absl::Status list_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuctl::daemon::testing

#endif  // GPUCTL_DAEMON_RPC_TESTING_IN_MEMORY_TRACE_STORE_H_
