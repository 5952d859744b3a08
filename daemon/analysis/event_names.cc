#include "daemon/analysis/event_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace gpuctl::analysis {
namespace {

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel"; "cudaMemcpyAsync_ptsz" ->
// "cudaMemcpyAsync".
absl::string_view BaseApiName(absl::string_view name) {
  for (absl::string_view suffix : {"_ptsz", "_ptds"}) {
    if (absl::ConsumeSuffix(&name, suffix)) break;
  }
  size_t v = name.rfind("_v");
  if (v != absl::string_view::npos && v + 2 < name.size()) {
    bool digits = true;
    for (char c : name.substr(v + 2)) digits = digits && absl::ascii_isdigit(c);
    if (digits) name = name.substr(0, v);
  }
  for (absl::string_view suffix : {"_ptsz", "_ptds"}) {
    if (absl::ConsumeSuffix(&name, suffix)) break;
  }
  return name;
}

}  // namespace

ApiKind ClassifyApiCall(absl::string_view full_name) {
  absl::string_view name = BaseApiName(full_name);
  if (name == "cudaGraphLaunch" || name == "cuGraphLaunch") return ApiKind::kGraphLaunch;
  if (absl::StartsWith(name, "cudaLaunchKernel") || absl::StartsWith(name, "cuLaunchKernel") ||
      absl::StartsWith(name, "cudaLaunchCooperativeKernel") ||
      absl::StartsWith(name, "cuLaunchCooperativeKernel") || name == "cuLaunchGrid" ||
      name == "cuLaunchGridAsync" || name == "cudaLaunch") {
    return ApiKind::kKernelLaunch;
  }
  if (name == "cudaDeviceSynchronize" || name == "cudaStreamSynchronize" ||
      name == "cudaEventSynchronize" || name == "cudaThreadSynchronize" ||
      name == "cuCtxSynchronize" || name == "cuStreamSynchronize" || name == "cuEventSynchronize") {
    return ApiKind::kSynchronize;
  }
  const bool copy = absl::StartsWith(name, "cudaMemcpy") || absl::StartsWith(name, "cuMemcpy") ||
                    absl::StartsWith(name, "cudaMemset") || absl::StartsWith(name, "cuMemset");
  if (copy) return absl::StrContains(name, "Async") ? ApiKind::kMemcpyAsync : ApiKind::kMemcpySync;
  return ApiKind::kOther;
}

bool IsCommunicationKernel(absl::string_view name) {
  return name.size() >= 4 && absl::EqualsIgnoreCase(name.substr(0, 4), "nccl");
}

CopyName ParseCopyName(absl::string_view name) {
  CopyName out;
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, "Memcpy ")) return out;
  struct Kind {
    absl::string_view text;
    CopyDirection direction;
  };
  static constexpr Kind kKinds[] = {
      {"HtoD", CopyDirection::kHtoD}, {"DtoH", CopyDirection::kDtoH},
      {"DtoD", CopyDirection::kDtoD}, {"HtoH", CopyDirection::kHtoH},
      {"PtoP", CopyDirection::kPtoP}, {"HtoA", CopyDirection::kHtoD},
      {"AtoH", CopyDirection::kDtoH}, {"AtoD", CopyDirection::kDtoD},
      {"DtoA", CopyDirection::kDtoD}, {"AtoA", CopyDirection::kDtoD},
  };
  for (const Kind& kind : kKinds) {
    if (absl::StartsWith(rest, kind.text)) {
      out.direction = kind.direction;
      break;
    }
  }
  out.pageable = absl::StrContains(rest, "Pageable");
  return out;
}

std::optional<int64_t> ParseStepName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "ProfilerStep#")) return std::nullopt;
  int64_t n = 0;
  if (!absl::SimpleAtoi(name, &n)) return std::nullopt;
  return n;
}

absl::string_view CopyDirectionName(CopyDirection direction) {
  switch (direction) {
    case CopyDirection::kHtoD:
      return "HtoD";
    case CopyDirection::kDtoH:
      return "DtoH";
    case CopyDirection::kDtoD:
      return "DtoD";
    case CopyDirection::kHtoH:
      return "HtoH";
    case CopyDirection::kPtoP:
      return "PtoP";
    case CopyDirection::kOther:
      break;
  }
  return "other";
}

}  // namespace gpuctl::analysis
