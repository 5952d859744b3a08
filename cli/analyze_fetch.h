#ifndef GPUCTL_CLI_ANALYZE_FETCH_H_
#define GPUCTL_CLI_ANALYZE_FETCH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/cancel_group.h"
#include "cli/command_env.h"
#include "cli/host_list.h"
#include "gpuctl/v1/manifest.pb.h"

namespace gpuctl::cli {

// Where `gpuctl analyze --trace-id` / `--since` put what they fetch.
struct FetchSettings {
  std::vector<HostEntry> hosts;
  size_t parallel = 64;  // hosts contacted at once
  // Downloads go to <root>/<host label>/<trace id>/ (HostLabel), so that two
  // hosts' files never share a directory.
  std::string root;
  // From the daemons' S3 bucket (GetTraceRequest.bucket, ListTracesRequest.bucket)
  // instead of their own stores.
  bool bucket = false;
};

// `target` as a directory name: every character but [A-Za-z0-9.-] becomes
// '_' ("10.0.0.7:7070" -> "10.0.0.7_7070").
std::string HostLabel(const std::string& target);

// How one host's part of one trace went.
struct HostFetch {
  std::string target;
  std::string directory;  // the trace's files; empty unless status is ok
  absl::Status status;    // NOT_FOUND (an RPC error) when the host lacks the trace
};

// Downloads every file of `trace_id` from each of `hosts` (a subset of
// settings.hosts' targets, or all of them when empty) with DownloadTrace, as
// `gpuctl get` does. A host whose download fails leaves no directory the
// download created (one that existed before stays). One entry per host, in
// order.
std::vector<HostFetch> FetchTrace(const std::string& trace_id, const std::vector<HostEntry>& hosts,
                                  const FetchSettings& settings, const CliEnv& env,
                                  CancelGroup& cancel);

// With settings.bucket: `trace_id` as the bucket holds it, every host's
// part, from the first of `hosts` that delivers it (any daemon sharing the
// bucket serves all of it). One entry: that host's, else, when none
// delivered, one per host asked, in order.
std::vector<HostFetch> FetchTraceFromBucket(const std::string& trace_id,
                                            const std::vector<HostEntry>& hosts,
                                            const FetchSettings& settings, const CliEnv& env,
                                            CancelGroup& cancel);

// The UTC days, today included, a bucket listing must cover to reach back
// to `created_after` (at most 366).
uint32_t BucketDaysSince(absl::Time created_after, absl::Time now);

// One trace the daemons listed: its id, when it was created, which hosts
// store it (every host's manifest names the trace).
struct ListedTrace {
  std::string trace_id;
  absl::Time created;
  std::vector<HostEntry> hosts;
};

struct TraceListing {
  std::vector<ListedTrace> traces;  // newest first
  // Hosts whose listing failed, and why (an RPC error, or DATA_LOSS).
  std::vector<HostFetch> failed;
};

// The traces of `job_id` (and `trigger` when set) created at or after
// `created_after` on every host, as `gpuctl traces` lists them (with
// settings.bucket, as `gpuctl traces --bucket`), merged by trace id, newest
// first.
TraceListing ListJobTraces(const std::string& job_id, v1::TriggerKind trigger,
                           absl::Time created_after, const FetchSettings& settings,
                           const CliEnv& env);

// A directory that is removed, with what it holds, when this goes out of
// scope (unless `keep`).
class ScratchDir {
 public:
  // mkdtemp(3) under $TMPDIR (else /tmp).
  static absl::StatusOr<ScratchDir> Create();
  // An existing or new directory the user named; kept.
  static absl::StatusOr<ScratchDir> Keep(const std::string& path);
  ScratchDir(ScratchDir&& other) noexcept;
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  ScratchDir(std::string path, bool keep) : path_(std::move(path)), keep_(keep) {}
  std::string path_;
  bool keep_;
};

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_ANALYZE_FETCH_H_
