// libFuzzer entry point for the kineto trace converter. Built as a fuzzer
// with Clang (gpuctl_kineto_trace_fuzzer) and linked into
// kineto_trace_fuzz_test, which replays the seed corpus and mutations of it
// under any compiler. Whatever is accepted must come out as one valid JSON
// object carrying gpuctl's tag and every event counted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "daemon/convert/gzip.h"
#include "daemon/convert/kineto_trace.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuctl::daemon;  // NOLINT(google-build-using-namespace)
  const KinetoTraceTag tag{.trace_id = "t", .host = "h", .rank = 1, .pid = 2, .job_id = "j"};
  const absl::string_view json(reinterpret_cast<const char*>(data), size);  // NOLINT
  auto converted = ConvertKinetoTrace(json, tag, 1);
  if (!converted.ok()) {
    if (converted.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  auto text = GzipDecompress(converted->gzip);
  if (!text.ok()) std::abort();
  nlohmann::json out = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!out.is_object() || !out["traceEvents"].is_array() || out["gpuctl"]["trace_id"] != "t" ||
      out["traceEvents"].size() != converted->summary.event_count) {
    std::abort();
  }
  return 0;
}
