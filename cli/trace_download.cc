#include "cli/trace_download.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/bounded_parallel.h"
#include "cli/connection.h"
#include "cli/format.h"
#include "gpuctl/v1/service.grpc.pb.h"

namespace gpuctl::cli {
namespace {

constexpr char kManifestName[] = "manifest.json";
// Leaves room for a suffix within the 255 characters of a safe name.
constexpr size_t kMaxHostKeyChars = 200;

std::string SafeFromTarget(const std::string& target) {
  std::string key;
  for (char c : target) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    key.push_back(ok ? c : '_');
  }
  while (!key.empty() && key[0] == '.') key.erase(0, 1);
  key.resize(std::min(key.size(), kMaxHostKeyChars));
  return key.empty() ? "host" : key;
}

// A distinct, safe name per host for the files it contributes.
std::vector<std::string> HostKeys(const std::vector<HostTrace>& hosts) {
  std::map<std::string, size_t> uses;
  std::vector<std::string> keys;
  for (const HostTrace& h : hosts) {
    std::string name = h.name();
    keys.push_back(IsSafeName(name) && name.size() <= kMaxHostKeyChars ? name
                                                                       : SafeFromTarget(h.target));
    ++uses[keys.back()];
  }
  std::set<std::string> taken;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (uses[keys[i]] > 1) keys[i] = SafeFromTarget(hosts[i].target);
    std::string key = keys[i];
    for (size_t n = 2; !taken.insert(key).second; ++n) key = absl::StrCat(keys[i], "-", n);
    keys[i] = key;
  }
  return keys;
}

}  // namespace

std::vector<std::optional<DownloadPlan>> PlanDownloads(const std::vector<HostTrace>& hosts) {
  std::vector<std::optional<DownloadPlan>> plans(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].HasFiles()) plans[i].emplace();
  }
  if (hosts.size() == 1) return plans;
  const std::vector<std::string> keys = HostKeys(hosts);
  std::set<std::string> taken;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!plans[i]) continue;
    std::string manifest = absl::StrCat(keys[i], ".", kManifestName);
    plans[i]->files.push_back(kManifestName);
    plans[i]->local_names[kManifestName] = manifest;
    taken.insert(manifest);
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!plans[i]) continue;
    DownloadPlan& plan = *plans[i];
    for (const auto& [pid, result] : hosts[i].results) {
      const std::string& name = result.file();
      if (name.empty() || plan.local_names.contains(name)) continue;
      plan.files.push_back(name);
      std::string local = name;
      if (taken.contains(local)) local = absl::StrCat(keys[i], "-", name);
      if (!IsSafeName(local) || taken.contains(local)) {
        plan.error = absl::StrCat("cannot save \"", Printable(name),
                                  "\": its name clashes with another host's file");
        break;
      }
      taken.insert(local);
      if (local != name) plan.local_names[name] = local;
    }
  }
  return plans;
}

std::vector<HostDownload> DownloadFleetTrace(const std::vector<HostTrace>& hosts,
                                             const FleetDownloadOptions& options,
                                             CancelGroup& cancel) {
  std::vector<std::optional<DownloadPlan>> plans = PlanDownloads(hosts);
  std::vector<size_t> planned;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i]) planned.push_back(i);
  }
  std::vector<HostDownload> downloads(hosts.size());
  RunBounded(planned.size(), options.parallel, [&](size_t n) {
    const size_t i = planned[n];
    const DownloadPlan& plan = *plans[i];
    HostDownload& download = downloads[i];
    download.attempted = true;
    download.local_names = plan.local_names;
    if (!plan.error.empty()) {
      download.status = absl::FailedPreconditionError(plan.error);
      return;
    }
    if (cancel.cancelled()) {
      download.status = absl::CancelledError("download interrupted");
      return;
    }
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        Connect(hosts[i].target, options.connect_timeout, cancel.flag(), options.security);
    if (!channel.ok()) {
      download.status = channel.status();
      return;
    }
    std::unique_ptr<v1::Gpuctl::Stub> stub = v1::Gpuctl::NewStub(*channel);
    DownloadOptions request;
    request.trace_id = options.trace_id;
    request.files = plan.files;
    request.local_names = plan.local_names;
    request.output_root = options.output_root;
    request.timeout = options.transfer_timeout;
    request.cancel = &cancel;
    absl::StatusOr<DownloadResult> result = DownloadTrace(*stub, request);
    if (result.ok()) {
      download.files = std::move(result->files);
    } else {
      download.status = result.status();
    }
  });
  return downloads;
}

}  // namespace gpuctl::cli
