#ifndef GPUCTL_DAEMON_CONVERT_GZIP_H_
#define GPUCTL_DAEMON_CONVERT_GZIP_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// libdeflate's level 5 compresses trace JSON to the size zlib's level 6 gives
// (0.7 % smaller on bench/convert_bench.cc's capture) in less than half
// the time; its level 6 is 15 % smaller again but 1.4x slower (figures in
// docs/benchmarks.md).
inline constexpr int kDefaultGzipLevel = 5;

// Streaming gzip (RFC 1952) compressor: Append() input in pieces, Finish()
// once; the compressed bytes accumulate in output(). The output is always
// one gzip member, so every reader sees the whole stream, including those
// that inflate only a file's first member (catapult's chrome://tracing).
// libdeflate has no streaming interface: the input is compressed in pieces
// of kGzipMemberBytes, each a raw DEFLATE stream, joined into one stream
// (see gzip.cc). At most one piece of input and the previous piece's output
// are held at a time. One MiB keeps a conversion's working memory small for
// 0.25 % more output than 8 MiB pieces give.
inline constexpr size_t kGzipMemberBytes = size_t{1} << 20;
class GzipEncoder {
 public:
  static constexpr size_t kMemberBytes = kGzipMemberBytes;
  // `level` 0-9.
  static absl::StatusOr<std::unique_ptr<GzipEncoder>> Create(int level = kDefaultGzipLevel);
  ~GzipEncoder();
  GzipEncoder(const GzipEncoder&) = delete;
  GzipEncoder& operator=(const GzipEncoder&) = delete;

  absl::Status Append(absl::string_view data);
  absl::Status Finish();
  const std::string& output() const { return output_; }
  std::string TakeOutput() { return std::move(output_); }

 private:
  struct State;
  explicit GzipEncoder(std::unique_ptr<State> state);
  // Compresses one piece of input into the held stream (releasing the one
  // before it, joined to it).
  absl::Status CompressMember(absl::string_view data);
  absl::Status ReleaseHeld(bool more);

  std::unique_ptr<State> state_;
  std::string output_;
  bool finished_ = false;
};

absl::StatusOr<std::string> GzipCompress(absl::string_view data, int level = kDefaultGzipLevel);

// Decompresses one or more concatenated gzip members; fails on corrupt input
// or when the output would exceed `max_output_bytes`.
absl::StatusOr<std::string> GzipDecompress(absl::string_view data,
                                           size_t max_output_bytes = size_t{1} << 32);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONVERT_GZIP_H_
