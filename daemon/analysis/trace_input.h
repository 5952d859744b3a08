#ifndef GPUCTL_DAEMON_ANALYSIS_TRACE_INPUT_H_
#define GPUCTL_DAEMON_ANALYSIS_TRACE_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::analysis {

// The bytes of a trace file, decompressed as they are read: plain JSON, or
// gzip (RFC 1952) of one or more members, inflated one buffer at a time, so
// that neither the compressed nor the decompressed file is held in memory.
// gzip is recognised by its magic bytes, not by the file name.
// Thread-compatible; one reader at a time.
class TraceInput {
 public:
  // Opens `path` for reading; NOT_FOUND or INVALID_ARGUMENT naming it.
  static absl::StatusOr<TraceInput> OpenFile(const std::string& path);
  // Reads from `bytes`, which must outlive the input.
  static TraceInput FromBytes(absl::string_view bytes);

  TraceInput(TraceInput&&) noexcept;
  TraceInput& operator=(TraceInput&&) noexcept;
  ~TraceInput();

  // Fills `out` with up to `cap` decompressed bytes and returns how many;
  // 0 at the end of the input or on an error (then status() says which).
  size_t Read(char* out, size_t cap);
  // OK, or INVALID_ARGUMENT: corrupt or truncated gzip data, an I/O error;
  // the message names the byte offset in the file as stored.
  const absl::Status& status() const;
  bool gzip() const;
  // The decompressed bytes Read() has returned so far: the document's size
  // once it is read to its end.
  uint64_t bytes_read() const;

 private:
  struct State;
  explicit TraceInput(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_TRACE_INPUT_H_
