#include "daemon/store/trace_file_name.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gpuctl::daemon {
namespace {

constexpr size_t kMaxHostInFileName = 128;
constexpr absl::string_view kTraceFileSuffix = ".json.gz";

// Consumes one or more ASCII digits, after a '-' when `signed_ok`.
bool ConsumeNumber(absl::string_view* text, bool signed_ok) {
  if (signed_ok && absl::StartsWith(*text, "-")) text->remove_prefix(1);
  size_t n = 0;
  while (n < text->size() && absl::ascii_isdigit(static_cast<unsigned char>((*text)[n]))) ++n;
  if (n == 0) return false;
  text->remove_prefix(n);
  return true;
}

}  // namespace

std::string TraceFileHost(absl::string_view host) {
  std::string clean;
  for (char c : host.substr(0, kMaxHostInFileName)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-';
    clean.push_back(ok ? c : '-');
  }
  if (clean.empty()) clean = "unknown";
  if (clean.front() == '.') clean.front() = '-';
  return clean;
}

std::string TraceFileName(absl::string_view host, int32_t rank, int32_t pid) {
  return absl::StrCat(TraceFileHost(host), "-rank", rank, "-pid", pid, kTraceFileSuffix);
}

bool IsTraceFileOfHost(absl::string_view file, absl::string_view host) {
  if (!absl::ConsumePrefix(&file, TraceFileHost(host)) || !absl::ConsumePrefix(&file, "-rank") ||
      !ConsumeNumber(&file, /*signed_ok=*/true) || !absl::ConsumePrefix(&file, "-pid") ||
      !ConsumeNumber(&file, /*signed_ok=*/false)) {
    return false;
  }
  return file == kTraceFileSuffix;
}

}  // namespace gpuctl::daemon
