// libFuzzer entry point for the trace reader and the diagnoses. Built as a
// fuzzer with Clang (gpuctl_analysis_fuzzer) and linked into
// trace_reader_fuzz_test, which replays the seed corpus and mutations of it
// under any compiler. Input is a trace file as stored: JSON or gzip. A
// refusal must be INVALID_ARGUMENT; whatever is read must analyse and render
// to valid JSON, and to an HTML page into which no name of the trace put a
// tag. The input is also read in tiny pieces (1 to 64 bytes, from its first
// byte), which cuts it everywhere: valid JSON must then give the same model.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "daemon/analysis/analyze.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/trace_input.h"
#include "daemon/analysis/trace_reader.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuctl::analysis;  // NOLINT(google-build-using-namespace)
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);  // NOLINT
  absl::StatusOr<TraceModel> model = ReadTraceBytes(bytes, "fuzz.json");
  const size_t piece = size == 0 ? 1 : 1 + data[0] % 64;
  absl::StatusOr<TraceModel> pieces =
      ReadTraceInPieces(TraceInput::FromBytes(bytes), "fuzz.json", piece);
  if (!pieces.ok() && pieces.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (model.ok() && nlohmann::json::accept(bytes)) {
    if (!pieces.ok() || pieces->info.events != model->info.events ||
        pieces->info.skipped_events != model->info.skipped_events ||
        pieces->gpu_ops.size() != model->gpu_ops.size() ||
        pieces->api_calls.size() != model->api_calls.size()) {
      std::abort();
    }
  }
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
