#ifndef GPUCTL_CLI_LIST_COMMANDS_H_
#define GPUCTL_CLI_LIST_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/command_env.h"
#include "gpuctl/v1/manifest.pb.h"
#include "gpuctl/v1/service.grpc.pb.h"

namespace gpuctl::cli {

// The single-host commands. Each returns an exit code (cli/exit_codes.h);
// `target` is normalized (see NormalizeHost). `ps` is in cli/ps_command.h.

// What `gpuctl traces` asks for.
struct TracesQuery {
  std::string job_id;
  v1::TriggerKind trigger = v1::TRIGGER_KIND_UNSPECIFIED;
  int limit = 0;  // 0: no limit
  // --bucket: the traces in the daemon's S3 bucket, every daemon's, back
  // `bucket_days` days (0: the daemon's default), not its own store's.
  bool bucket = false;
  uint32_t bucket_days = 0;
  // Only traces created at or after this (the listing is newest first, so
  // paging stops at the first older one).
  absl::Time created_after = absl::InfinitePast();
};

// The listing `gpuctl traces` prints, from the daemon at `target`: newest
// first, following page tokens until the end, `limit` traces or the first
// trace older than `created_after`. Daemon errors come back marked by
// FromRpcStatus; DATA_LOSS (not an RPC error) when the daemon repeats a page
// token.
absl::StatusOr<std::vector<v1::TraceManifest>> ListStoredTraces(v1::Gpuctl::StubInterface& stub,
                                                                const std::string& target,
                                                                const TracesQuery& query,
                                                                absl::Duration rpc_timeout);

// `gpuctl traces`: stored traces, newest first, following page tokens until
// the end or `limit` traces; only those of `trigger` when it is set (the
// daemon filters; what an older daemon lists unfiltered is filtered here).
int RunTraces(const std::string& target, const TracesQuery& query, bool json, const CliEnv& env);

// "on-demand", "scheduled", "anomaly" ("-" otherwise), and back
// (INVALID_ARGUMENT naming --trigger).
absl::string_view TriggerKindWord(v1::TriggerKind kind);
absl::StatusOr<v1::TriggerKind> ParseTriggerKind(absl::string_view word);

// `gpuctl status`.
int RunStatus(const std::string& target, bool json, const CliEnv& env);

// `gpuctl get`: downloads `files` (empty: all) of a trace into
// <output_root>/<trace_id>/; with `bucket`, every host's part of it from the
// daemon's bucket.
int RunGet(const std::string& target, const std::string& trace_id,
           const std::vector<std::string>& files, const std::string& output_root, bool bucket,
           const CliEnv& env);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_LIST_COMMANDS_H_
