#ifndef GPUCTL_DAEMON_ANALYSIS_TRACE_READER_H_
#define GPUCTL_DAEMON_ANALYSIS_TRACE_READER_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/analysis/trace_input.h"
#include "daemon/analysis/trace_model.h"

namespace gpuctl::analysis {

// Reads one process's trace into the normalised model, as a stream: the
// JSON is decompressed and parsed a piece at a time (StreamTraceJson,
// simdjson's On-Demand API), and only the model's compact records are kept.
//
// Accepts gpuctl's trace files (docs/trace-format.md; recognised by their
// `gpuctl` member) and kineto's (PyTorch profiler) trace files, plain or
// gzip (one or more members). Events of kinds the diagnoses do not use
// (flows, Python functions, counters, instants, overhead) are counted and
// dropped; an event without a usable `ts` is counted as skipped.
//
// Errors are INVALID_ARGUMENT (NOT_FOUND for a missing file) whose message
// begins with `name` and names the byte offset: in the decompressed JSON
// for a syntax error or a document that is not a trace, in the file as
// stored for corrupt or truncated gzip. Never crashes, whatever the input.
absl::StatusOr<TraceModel> ReadTraceFile(const std::string& path);
absl::StatusOr<TraceModel> ReadTrace(TraceInput input, const std::string& name);
absl::StatusOr<TraceModel> ReadTraceBytes(absl::string_view bytes, const std::string& name);
// As ReadTrace, parsing `piece_bytes` of the document at a time (the
// default is trace_json_stream.h's kTracePieceBytes): for tests.
absl::StatusOr<TraceModel> ReadTraceInPieces(TraceInput input, const std::string& name,
                                             size_t piece_bytes);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_TRACE_READER_H_
