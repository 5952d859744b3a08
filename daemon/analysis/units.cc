#include "daemon/analysis/units.h"

#include <cstdlib>

#include "absl/strings/str_format.h"

namespace gpuctl::analysis {
namespace {

std::string ThreeDigits(double v, const char* unit) {
  if (v >= 100) return absl::StrFormat("%.0f %s", v, unit);
  if (v >= 10) return absl::StrFormat("%.1f %s", v, unit);
  return absl::StrFormat("%.2f %s", v, unit);
}

}  // namespace

std::string FormatNs(int64_t ns) {
  const double a = static_cast<double>(std::llabs(ns));
  const double v = static_cast<double>(ns);
  if (a < 1e3) return absl::StrFormat("%d ns", ns);
  if (a < 1e6) return ThreeDigits(v / 1e3, "us");
  if (a < 1e9) return ThreeDigits(v / 1e6, "ms");
  return ThreeDigits(v / 1e9, "s");
}

double SharePct(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

std::string FormatShare(int64_t part, int64_t whole) {
  return absl::StrFormat("%.1f%%", SharePct(part, whole));
}

std::string FormatBytes(uint64_t bytes) {
  const double v = static_cast<double>(bytes);
  if (bytes < 1000) return absl::StrFormat("%d B", bytes);
  if (v < 1e6) return ThreeDigits(v / 1e3, "KB");
  if (v < 1e9) return ThreeDigits(v / 1e6, "MB");
  return ThreeDigits(v / 1e9, "GB");
}

}  // namespace gpuctl::analysis
