// libFuzzer entry point for the trace reader and the diagnoses. Built as a
// fuzzer with Clang (gpuctl_analysis_fuzzer) and linked into
// trace_reader_fuzz_test, which replays the seed corpus and mutations of it
// under any compiler. Input is a trace file as stored: JSON or gzip. A
// refusal must be INVALID_ARGUMENT; whatever is read must analyse and render
// to valid JSON, and to an HTML page into which no name of the trace put a
// tag.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/trace_reader.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuctl::analysis;  // NOLINT(google-build-using-namespace)
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);  // NOLINT
  absl::StatusOr<TraceModel> model = ReadTraceBytes(bytes, "fuzz.json");
  if (!model.ok()) {
    if (model.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  AnalyzeOptions options;
  options.min_kernels = 1;
  options.link_gbps = 10;
  std::vector<TraceReport> reports = {AnalyzeModel(*model, options)};
  const std::vector<Finding> findings = RankFindings(reports);
  if (RenderText(reports, findings).empty()) std::abort();
  nlohmann::json doc = nlohmann::json::parse(RenderJson(reports, findings, {}, options), nullptr,
                                             /*allow_exceptions=*/false);
  if (!doc.is_object() || doc["traces"].size() != 1) std::abort();
  const std::string html = RenderHtml(reports, findings, {}, options);
  if (html.find("<script") != std::string::npos || html.find("<img") != std::string::npos ||
      html.size() < 8 || html.compare(html.size() - 8, 8, "</html>\n") != 0) {
    std::abort();
  }
  return 0;
}
