// libFuzzer entry point for the paths `gpuctl get` and `gpuctl trace -o DIR`
// build from what daemons send: the trace id, each host's name and the file
// names of its processes' results, which the daemon makes of its host name,
// the rank and the pid (PlanDownloads, TraceDirectory, SavedFilePath,
// TemporaryFileTemplate).
//
// The input is lines, each "<kind><text>"; "%HH" in the text is the byte HH
// (so a name can hold a newline):
//   R<dir>     the output directory (default "out")
//   T<id>      the trace id
//   H<target>  starts a host, with no daemon host name yet
//   N<name>    the current host's daemon host name (TraceStarted.host)
//   F<name>    one more process result of the current host, with this file
//
// Invariants ("plain component" is checked here independently of IsSafeName:
// not empty, ".", ".." or hidden, at most 255 bytes, no '/', NUL, control,
// backslash or non-ASCII byte):
//  - TraceDirectory accepts exactly the safe ids, each a plain component, and
//    its result, normalised, is that one component below the normalised
//    output directory;
//  - every file a host's download can save (one host: whatever it names;
//    several: its plan) lands as one plain component in the trace directory,
//    and its temporary is a hidden name of at most 255 bytes beside it;
//  - a plan without an error requests each file once, names every file the
//    host reported, and no two files of any hosts' plans share a saved name.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "cli/download_paths.h"
#include "cli/download_plan.h"

namespace {

namespace fs = std::filesystem;
using gpuctl::cli::DownloadPlan;
using gpuctl::cli::HostFiles;

constexpr size_t kMaxHosts = 64;
constexpr size_t kMaxFilesPerHost = 64;
constexpr absl::string_view kManifest = "manifest.json";

// What a saved name must be, written without IsSafeName: a single path
// component that names an entry of the directory and is not hidden.
bool IsPlainComponent(absl::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  if (name.front() == '.') return false;
  for (char c : name) {
    if (c == '/' || c == '\0' || static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f || c == '\\') {
      return false;
    }
  }
  return true;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Unescape(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexDigit(text[i + 1]) >= 0 &&
        HexDigit(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigit(text[i + 1]) * 16 + HexDigit(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

struct Input {
  std::string root = "out";
  std::string trace_id;
  std::vector<HostFiles> hosts;
};

Input Parse(absl::string_view data) {
  Input in;
  while (!data.empty()) {
    const size_t end = std::min(data.find('\n'), data.size());
    const absl::string_view line = data.substr(0, end);
    data.remove_prefix(std::min(end + 1, data.size()));
    if (line.empty()) continue;
    const std::string text = Unescape(line.substr(1));
    switch (line[0]) {
      case 'R':
        in.root = text;
        break;
      case 'T':
        in.trace_id = text;
        break;
      case 'H':
        if (in.hosts.size() < kMaxHosts) {
          HostFiles& host = in.hosts.emplace_back();
          host.target = text;
          host.name = text;
        }
        break;
      case 'N':
        // HostTrace::name(): an empty daemon host name leaves the target.
        if (!in.hosts.empty() && !text.empty()) in.hosts.back().name = text;
        break;
      case 'F':
        if (!in.hosts.empty() && in.hosts.back().files.size() < kMaxFilesPerHost) {
          in.hosts.back().files.push_back(text);
        }
        break;
      default:
        break;
    }
  }
  return in;
}

// `path` is `name`, one plain component, directly inside `dir`.
void CheckDirectlyInside(const std::string& dir, const std::string& path, absl::string_view name) {
  if (!IsPlainComponent(name)) std::abort();
  const fs::path relative =
      fs::path(path).lexically_normal().lexically_relative(fs::path(dir).lexically_normal());
  if (relative != fs::path(std::string(name))) std::abort();
  if (path.size() <= name.size() ||
      path.compare(path.size() - name.size(), name.size(), name.data(), name.size()) != 0) {
    std::abort();
  }
  const std::string parent = path.substr(0, path.size() - name.size());
  if (parent != dir && parent != dir + "/") std::abort();
}

// The directory a download of `trace_id` goes to, or nullopt when refused.
std::optional<std::string> CheckTraceDirectory(const std::string& root,
                                               const std::string& trace_id) {
  absl::StatusOr<std::string> dir = gpuctl::cli::TraceDirectory(root, trace_id);
  if (dir.ok() != (!root.empty() && gpuctl::cli::IsSafeName(trace_id))) std::abort();
  if (!dir.ok()) return std::nullopt;
  CheckDirectlyInside(root, *dir, trace_id);
  return *dir;
}

// Where a file saved as `local` goes, and its temporary. A manifest path
// goes one level down, into the trace's "_gpuctl", as one plain component.
void CheckSavedFile(const std::string& dir, const std::string& local) {
  absl::StatusOr<gpuctl::cli::SaveLocation> where = gpuctl::cli::LocateSavedFile(dir, local);
  if (where.ok() != gpuctl::cli::IsSafeTracePath(local)) std::abort();
  if (where.ok() && where->directory != dir) {
    CheckDirectlyInside(dir, where->directory, "_gpuctl");
    if (!absl::EndsWith(local, "/" + where->name)) std::abort();
    CheckSavedFile(where->directory, where->name);
    return;
  }
  absl::StatusOr<std::string> path = gpuctl::cli::SavedFilePath(dir, local);
  absl::StatusOr<std::string> temp = gpuctl::cli::TemporaryFileTemplate(dir, local);
  if (path.ok() != gpuctl::cli::IsSafeName(local) || temp.ok() != path.ok()) std::abort();
  if (!path.ok()) return;
  CheckDirectlyInside(dir, *path, local);
  const std::string temp_name = fs::path(*temp).filename().string();
  if (temp_name.size() > 255 || temp_name.size() < 8 || temp_name.front() != '.' ||
      temp_name.compare(temp_name.size() - 7, 7, ".XXXXXX") != 0) {
    std::abort();
  }
  if (temp->size() <= temp_name.size() ||
      temp->compare(0, temp->size() - temp_name.size(),
                    path->substr(0, path->size() - local.size())) != 0) {
    std::abort();
  }
}

std::string SavedName(const DownloadPlan& plan, const std::string& name) {
  auto it = plan.local_names.find(name);
  return it == plan.local_names.end() ? name : it->second;
}

void CheckPlans(const std::vector<HostFiles>& hosts,
                const std::vector<std::optional<DownloadPlan>>& plans, const std::string& dir) {
  if (plans.size() != hosts.size()) std::abort();
  std::set<std::string> saved;  // across hosts: they share the directory
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::vector<std::string>& reported = hosts[i].files;
    const bool has_files =
        std::any_of(reported.begin(), reported.end(), [](const auto& f) { return !f.empty(); });
    if (plans[i].has_value() != has_files) std::abort();
    if (!plans[i] || !plans[i]->error.empty()) continue;
    const DownloadPlan& plan = *plans[i];
    if (hosts.size() == 1) {
      // Everything is fetched under the daemon's names, each checked.
      if (!plan.files.empty() || !plan.local_names.empty()) std::abort();
      CheckSavedFile(dir, std::string(kManifest));
      for (const std::string& file : reported) CheckSavedFile(dir, file);
      continue;
    }
    const std::set<std::string> files(plan.files.begin(), plan.files.end());
    if (files.size() != plan.files.size() || !files.contains(std::string(kManifest))) std::abort();
    for (const std::string& file : reported) {
      if (!file.empty() && !files.contains(file)) std::abort();
    }
    for (const auto& [name, local] : plan.local_names) {
      if (!files.contains(name)) std::abort();
    }
    for (const std::string& name : plan.files) {
      if (!gpuctl::cli::IsSafeName(name) || !IsPlainComponent(name)) std::abort();
      const std::string local = SavedName(plan, name);
      if (!gpuctl::cli::IsSafeTracePath(local)) std::abort();
      if (!saved.insert(local).second) std::abort();
      CheckSavedFile(dir, local);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Input in = Parse(absl::string_view(reinterpret_cast<const char*>(data), size));  // NOLINT
  const std::optional<std::string> dir = CheckTraceDirectory(in.root, in.trace_id);
  CheckPlans(in.hosts, gpuctl::cli::PlanDownloads(in.hosts), dir.value_or("out/trace"));
  return 0;
}
