#ifndef GPUCTL_DAEMON_ANALYSIS_TRACE_JSON_STREAM_H_
#define GPUCTL_DAEMON_ANALYSIS_TRACE_JSON_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/analysis/trace_input.h"
#include "simdjson.h"

namespace gpuctl::analysis {

// simdjson's views as Abseil's (which this Abseil keeps a distinct type).
inline absl::string_view AsAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Whether `s` is the literal `text` (compiled inline: a length check and a
// fixed-size compare).
template <size_t N>
inline bool Is(std::string_view s, const char (&text)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), text, N - 1) == 0;
}

// JSON's whitespace.
inline bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// A scalar's text as written: simdjson's raw token, which runs to the next
// structural character, without the whitespace before it.
inline std::string_view TokenText(simdjson::ondemand::value v) {
  std::string_view raw = v.raw_json_token();
  while (!raw.empty() && IsJsonSpace(raw.back())) raw.remove_suffix(1);
  return raw;
}

// Returns simdjson's error from the enclosing function when `expr` (an
// error_code) is not SUCCESS: for the visitors' readers.
#define GPUCTL_JSON_TRY(expr)                                   \
  do {                                                          \
    if (const simdjson::error_code gpuctl_json_error_ = (expr); \
        gpuctl_json_error_ != simdjson::SUCCESS) {              \
      return gpuctl_json_error_;                                \
    }                                                           \
  } while (false)

// A member's key. Keys without escapes (all that gpuctl and kineto write)
// are read in place; others are unescaped by simdjson.
// An object member's field, in place in `member`, which must hold no error.
// Copying it out (`member.get(field)`) costs a stall per member with GCC: the
// copy loads in one 16-byte move what two smaller stores have just written,
// which the CPU cannot forward.
inline simdjson::ondemand::field& FieldOf(
    simdjson::simdjson_result<simdjson::ondemand::field>& member) {
  simdjson::ondemand::field&& field = std::move(member).value_unsafe();
  return field;
}

inline simdjson::error_code KeyOf(simdjson::ondemand::field& field, std::string_view* key) {
  const char* raw = field.key().raw();  // after the opening quote; stage 1 saw it closed
  size_t n = 0;
  while (raw[n] != '"' && raw[n] != '\\') ++n;
  if (raw[n] == '"') {
    *key = std::string_view(raw, n);
    return simdjson::SUCCESS;
  }
  return field.unescaped_key().get(*key);
}

// What a Chrome trace document (`{"traceEvents": [...], ...}`) delivers as
// it streams: its top-level members other than traceEvents, and each
// traceEvents element. The values are simdjson On-Demand values, valid only
// during the call. A call returns simdjson's error when a value it reads
// fails; the stream decides whether that is malformed JSON or a piece that
// ended early (then the call is made again, with more bytes).
class TraceJsonVisitor {
 public:
  virtual ~TraceJsonVisitor() = default;
  virtual simdjson::error_code OnTopMember(std::string_view key,
                                           simdjson::ondemand::value value) = 0;
  // An element of traceEvents (an object). An element whose piece ended
  // early is delivered again with more bytes, so the visitor keeps an
  // element's effects only when it has read the element to its end.
  virtual simdjson::error_code OnEvent(simdjson::ondemand::object event) = 0;
  // The top-level members before traceEvents may be delivered again when
  // their piece ended early: SaveTop() comes before each try and
  // RestoreTop() after a try that is dropped.
  virtual void SaveTop() = 0;
  virtual void RestoreTop() = 0;
  // Why the visitor itself stopped the stream (a limit of its own, a
  // caller's callback that failed), asked after any call that returned an
  // error: a non-OK status ends the stream and is returned as it is; OK
  // leaves the error to the stream (malformed JSON, or a piece that ended
  // early).
  virtual absl::Status Stopped() const { return absl::OkStatus(); }

  // The document offset of `p`, a byte of a value being delivered (its
  // raw_json_token().data(), a key's raw()): for the visitor's own messages.
  uint64_t OffsetOf(const char* p) const {
    return piece_offset_ + static_cast<uint64_t>(p - piece_);
  }
  // Called by StreamTraceJson before it delivers the values of a piece: the
  // piece's first byte and its offset in the document.
  void SetPiece(const char* piece, uint64_t offset) {
    piece_ = piece;
    piece_offset_ = offset;
  }

 private:
  const char* piece_ = nullptr;
  uint64_t piece_offset_ = 0;
};

// Streams the trace in `input` to `visitor`, holding one piece of the
// decompressed document at a time (kTracePieceBytes, or one element when
// an element is larger, at most 64 MiB), each parsed with simdjson.
//
// simdjson parses documents held whole in memory, and a trace is hundreds
// of MB: each piece is cut at a line break (JSON keeps line breaks out of
// strings, so a cut there is between tokens; gpuctl and kineto write one or
// a few lines per event) or, on a file without line breaks, after a comma
// outside any string, and parsed as `[` + the piece + `]`. The elements that
// end within the piece are delivered; the rest of the piece starts the next
// one. An element that fails at the piece's end ended early; one that fails
// before it is malformed.
//
// Errors are INVALID_ARGUMENT: "malformed JSON at byte N: ..." or "not a
// trace: ..." with the byte offset in the decompressed document; the input's
// own read errors end the stream early (the caller checks input.status()).
// A visitor that stopped the stream (Stopped()) gets its own status back.
//
// `piece_bytes`: how much is read at a time. The default is large enough
// that simdjson's per-document costs vanish and small enough to stay in
// cache; tests and the fuzz target use tiny pieces to cut everywhere.
inline constexpr size_t kTracePieceBytes = size_t{1} << 20;
absl::Status StreamTraceJson(TraceInput* input, TraceJsonVisitor* visitor,
                             size_t piece_bytes = kTracePieceBytes);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_TRACE_JSON_STREAM_H_
