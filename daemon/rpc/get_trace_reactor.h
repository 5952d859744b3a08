#ifndef GPUCTL_DAEMON_RPC_GET_TRACE_REACTOR_H_
#define GPUCTL_DAEMON_RPC_GET_TRACE_REACTOR_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/common/task_runner.h"
#include "daemon/core/token_scope.h"
#include "daemon/store/trace_store.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpuctl::daemon {

inline constexpr size_t kTraceChunkBytes = 1 << 20;

// One Gpuctl.GetTrace call: streams the requested files of one trace as
// TraceChunks of at most kTraceChunkBytes, file by file, one write in
// flight, each serialized (the service's methods are raw: see
// raw_messages.h); the first chunk also says how the trace ended (its status
// and, when cancelled, why). Store reads run on `io` (they may block: disk, object storage),
// never on gRPC's threads; with a null `io` they run inline.
//
// Lifetime: deletes itself in OnDone. Exactly one step (a read task or a
// write) is outstanding at any time, and Finish is the last thing a step
// does.
class GetTraceReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `scope`: the caller's scoped token (outlives the call), or null for
  // full access; a trace outside it is NOT_FOUND, as if absent.
  GetTraceReactor(TraceStore* store, Executor* io, const v1::GetTraceRequest& request,
                  const TokenScope* scope = nullptr);

  void OnWriteDone(bool ok) override;
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  void Schedule();
  void Step();
  // Fills chunk_ with the next chunk; false when every file was sent.
  absl::Status NextChunk(bool* have_chunk);
  absl::Status ResolveFiles();
  // GetTraceRequest.bucket: every host's part of the trace, from the bucket.
  absl::Status ResolveBucketFiles();
  // files_: `stored`, or the request's files when it names some (each one
  // of `stored`, or any manifest name when `any_manifest_name`).
  absl::Status SelectFiles(std::vector<std::string> stored, bool any_manifest_name);

  TraceStore* const store_;
  Executor* const io_;
  const v1::GetTraceRequest request_;
  const TokenScope* const scope_;
  std::atomic<bool> cancelled_{false};

  // Touched only by the one outstanding step.
  bool resolved_ = false;
  std::vector<std::string> files_;
  size_t next_file_ = 0;
  std::unique_ptr<TraceFileReader> reader_;
  std::string current_file_;
  uint64_t offset_ = 0;
  bool sent_any_of_current_ = false;
  bool sent_first_chunk_ = false;
  // How the trace ended, from its manifest: sent on the first chunk.
  v1::TraceStatus trace_status_ = v1::TRACE_STATUS_UNSPECIFIED;
  v1::TraceCancellation cancellation_;
  v1::TraceChunk chunk_;
  grpc::ByteBuffer chunk_bytes_;
};

// A stored file name a client may ask for: one path component.
absl::Status ValidateTraceFileName(absl::string_view name);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_GET_TRACE_REACTOR_H_
