#include "cli/analyze_fetch.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/bounded_parallel.h"
#include "cli/download.h"
#include "cli/list_commands.h"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;

absl::Time CreatedAt(const v1::TraceManifest& t) {
  return absl::FromUnixSeconds(t.created_at().seconds()) +
         absl::Nanoseconds(t.created_at().nanos());
}

}  // namespace

std::string HostLabel(const std::string& target) {
  std::string label = target;
  for (char& c : label) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-';
    if (!keep) c = '_';
  }
  // Never "." or "..".
  if (label.find_first_not_of('.') == std::string::npos) label = absl::StrCat("host", label);
  return label;
}

std::vector<HostFetch> FetchTrace(const std::string& trace_id, const std::vector<HostEntry>& hosts,
                                  const FetchSettings& settings, const CliEnv& env,
                                  CancelGroup& cancel) {
  std::vector<HostFetch> out(hosts.size());
  RunBounded(hosts.size(), settings.parallel, [&](size_t i) {
    HostFetch& fetch = out[i];
    fetch.target = hosts[i].target;
    if (!hosts[i].error.empty()) {
      fetch.status = absl::UnavailableError(hosts[i].error);
      return;
    }
    absl::StatusOr<std::unique_ptr<v1::Gpuctl::Stub>> stub = OpenStub(fetch.target, env);
    if (!stub.ok()) {
      fetch.status = stub.status();
      return;
    }
    DownloadOptions options;
    options.trace_id = trace_id;
    options.output_root = absl::StrCat(settings.root, "/", HostLabel(fetch.target));
    options.bucket = settings.bucket;
    options.timeout = env.download_timeout;
    options.cancel = &cancel;
    // What a failed download leaves is removed, but never a directory that
    // was there before (a --keep directory of an earlier run).
    const fs::path trace_dir = fs::path(options.output_root) / trace_id;
    std::error_code ec;
    const bool host_dir_existed = fs::exists(options.output_root, ec);
    const bool trace_dir_existed = fs::exists(trace_dir, ec);
    absl::StatusOr<DownloadResult> result = DownloadTrace(**stub, options);
    if (!result.ok()) {
      fetch.status = result.status();
      if (!trace_dir_existed) fs::remove_all(trace_dir, ec);
      if (!host_dir_existed) fs::remove(options.output_root, ec);  // only when empty
      return;
    }
    fetch.directory = result->directory;
  });
  return out;
}

std::vector<HostFetch> FetchTraceFromBucket(const std::string& trace_id,
                                            const std::vector<HostEntry>& hosts,
                                            const FetchSettings& settings, const CliEnv& env,
                                            CancelGroup& cancel) {
  std::vector<HostFetch> tried;
  for (const HostEntry& host : hosts) {
    std::vector<HostFetch> one = FetchTrace(trace_id, {host}, settings, env, cancel);
    if (one.front().status.ok()) return one;
    tried.push_back(std::move(one.front()));
    if (cancel.cancelled()) break;
  }
  return tried;
}

uint32_t BucketDaysSince(absl::Time created_after, absl::Time now) {
  if (created_after >= now) return 1;
  const absl::CivilDay today = absl::ToCivilDay(now, absl::UTCTimeZone());
  const absl::CivilDay first = absl::ToCivilDay(created_after, absl::UTCTimeZone());
  return static_cast<uint32_t>(std::clamp<absl::civil_diff_t>(today - first + 1, 1, 366));
}

TraceListing ListJobTraces(const std::string& job_id, v1::TriggerKind trigger,
                           absl::Time created_after, const FetchSettings& settings,
                           const CliEnv& env) {
  const std::vector<HostEntry>& hosts = settings.hosts;
  std::vector<absl::StatusOr<std::vector<v1::TraceManifest>>> listed(hosts.size());
  RunBounded(hosts.size(), settings.parallel, [&](size_t i) {
    if (!hosts[i].error.empty()) {
      listed[i] = absl::UnavailableError(hosts[i].error);
      return;
    }
    absl::StatusOr<std::unique_ptr<v1::Gpuctl::Stub>> stub = OpenStub(hosts[i].target, env);
    if (!stub.ok()) {
      listed[i] = stub.status();
      return;
    }
    TracesQuery query{.job_id = job_id, .trigger = trigger, .created_after = created_after};
    if (settings.bucket) {
      query.bucket = true;
      query.bucket_days = BucketDaysSince(created_after, absl::Now());
    }
    listed[i] = ListStoredTraces(**stub, hosts[i].target, query, env.rpc_timeout);
  });
  TraceListing out;
  std::map<std::string, size_t> by_id;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!listed[i].ok()) {
      out.failed.push_back({hosts[i].target, "", listed[i].status()});
      continue;
    }
    for (const v1::TraceManifest& t : *listed[i]) {
      auto [it, added] = by_id.emplace(t.trace_id(), out.traces.size());
      if (added) out.traces.push_back({t.trace_id(), CreatedAt(t), {}});
      ListedTrace& trace = out.traces[it->second];
      trace.created = std::min(trace.created, CreatedAt(t));
      trace.hosts.push_back(hosts[i]);
    }
  }
  std::stable_sort(
      out.traces.begin(), out.traces.end(), [](const ListedTrace& a, const ListedTrace& b) {
        return a.created != b.created ? a.created > b.created : a.trace_id > b.trace_id;
      });
  return out;
}

absl::StatusOr<ScratchDir> ScratchDir::Create() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ =
      absl::StrCat(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp", "/gpuctl-analyze-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a temporary directory ", templ, ": ", std::strerror(errno)));
  }
  return ScratchDir(std::move(templ), false);
}

absl::StatusOr<ScratchDir> ScratchDir::Keep(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keep: cannot create directory ", path, ec ? ": " + ec.message() : ""));
  }
  return ScratchDir(path, true);
}

ScratchDir::ScratchDir(ScratchDir&& other) noexcept
    : path_(std::move(other.path_)), keep_(other.keep_) {
  other.path_.clear();
}

ScratchDir::~ScratchDir() {
  if (keep_ || path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace gpuctl::cli
