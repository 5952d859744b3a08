#include "cli/download_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "cli/download_paths.h"
#include "cli/format.h"
#include "gpuctl/v1/trace_layout.h"

namespace gpuctl::cli {
namespace {

// Asked for by the name every daemon version serves the manifest under.
constexpr absl::string_view kManifestName = layout::kLegacyManifestName;
// Leaves room for a "-<n>" suffix within the host part of a manifest name
// (layout::kMaxManifestHostBytes) and for a file name after it within the
// 255 characters of a safe name.
constexpr size_t kMaxHostKeyChars = layout::kMaxManifestHostBytes - 10;

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
std::vector<std::string> HostKeys(const std::vector<HostFiles>& hosts) {
  std::map<std::string, size_t> uses;
  std::vector<std::string> keys;
  for (const HostFiles& h : hosts) {
    const std::string& name = h.name;
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

std::vector<std::optional<DownloadPlan>> PlanDownloads(const std::vector<HostFiles>& hosts) {
  std::vector<std::optional<DownloadPlan>> plans(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::vector<std::string>& files = hosts[i].files;
    if (std::any_of(files.begin(), files.end(), [](const auto& f) { return !f.empty(); })) {
      plans[i].emplace();
    }
  }
  if (hosts.size() == 1) return plans;
  const std::vector<std::string> keys = HostKeys(hosts);
  std::set<std::string> taken;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!plans[i]) continue;
    std::string manifest = layout::ManifestPath(keys[i]);
    plans[i]->files.emplace_back(kManifestName);
    plans[i]->local_names[std::string(kManifestName)] = manifest;
    taken.insert(manifest);
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!plans[i]) continue;
    DownloadPlan& plan = *plans[i];
    // A name two of the host's processes report is one file: requested once.
    std::set<std::string> requested(plan.files.begin(), plan.files.end());
    for (const std::string& name : hosts[i].files) {
      if (name.empty() || !requested.insert(name).second) continue;
      if (!IsSafeName(name) || !IsSafeTracePath(name)) {
        plan.error = absl::StrCat("refusing file \"", Printable(name.substr(0, 64)),
                                  "\" from the daemon: unsafe file name");
        break;
      }
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

}  // namespace gpuctl::cli
