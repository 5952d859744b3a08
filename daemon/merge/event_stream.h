#ifndef GPUCTL_DAEMON_MERGE_EVENT_STREAM_H_
#define GPUCTL_DAEMON_MERGE_EVENT_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/analysis/trace_input.h"
#include "nlohmann/json.hpp"

namespace gpuctl::merge {

// Members keep the order the file has them in, so an event written back
// out reads as it was written (kineto's `args` order included).
using Json = nlohmann::ordered_json;

// One traceEvents element as parsed, with `ts` and `dur` as the file wrote
// them: the number's text, so that ns survive exactly (a double cannot hold
// a Unix time in µs with three decimals); empty when absent or not a number.
struct StreamedEvent {
  Json value = Json::object();
  std::string ts_text, dur_text;
};

// An event's `ph`; "" when absent or not a string.
std::string PhaseOf(const Json& event);

// Called once per traceEvents element, in file order, once the element is
// read whole; a non-OK status stops the stream and is returned by
// StreamTrace as it is.
using EventVisitor = std::function<absl::Status(const StreamedEvent& event)>;

// What StreamTrace saw besides the events.
struct StreamedHeader {
  // Every top-level member but traceEvents (baseTimeNanoseconds, gpuctl,
  // distributedInfo, ...), as parsed.
  Json members = Json::object();
  uint64_t events = 0;              // traceEvents elements, objects or not
  uint64_t decompressed_bytes = 0;  // the JSON's size (bytes read from the input)
};

// Parses a Chrome trace-event JSON document (an object with a traceEvents
// array) from `input` as a stream (analysis::StreamTraceJson, simdjson): a
// piece of about 1 MiB and one event are held at a time, never the
// document. `name` begins every error message. Errors are INVALID_ARGUMENT
// naming the byte offset (in the decompressed JSON for syntax, in the file
// for gzip, as analysis::TraceInput does): malformed JSON, a document that
// is not an object, no traceEvents array, nesting deeper than 64 levels in
// an event or a top-level member, an element that is not an object.
absl::StatusOr<StreamedHeader> StreamTrace(analysis::TraceInput input, const std::string& name,
                                           const EventVisitor& visit);
// The same, reading `piece_bytes` at a time (tests cut the document
// everywhere with tiny pieces).
absl::StatusOr<StreamedHeader> StreamTraceInPieces(analysis::TraceInput input,
                                                   const std::string& name,
                                                   const EventVisitor& visit, size_t piece_bytes);

// µs as a trace writes them ("251234.567", "12", "1.5e3") to ns: exact for
// up to three decimals (more round half up), exponents through a double.
// nullopt for text that is not a number or beyond ±9e15 µs (285 years).
std::optional<int64_t> MicrosTextToNs(const std::string& text);

}  // namespace gpuctl::merge

#endif  // GPUCTL_DAEMON_MERGE_EVENT_STREAM_H_
