#include "daemon/analysis/micros_text.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"

namespace gpuctl::analysis {

namespace {

// Exponent notation and very long numbers go through a double.
std::optional<int64_t> ViaDouble(absl::string_view text, double max_micros) {
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || std::fabs(v) > max_micros) {
    return std::nullopt;
  }
  return std::llround(v * 1000.0);
}

bool HasExponent(absl::string_view text) {
  for (char c : text) {
    if (c == 'e' || c == 'E') return true;
  }
  return false;
}

}  // namespace

std::optional<int64_t> MicrosTextToNanos(absl::string_view text, double max_micros) {
  if (text.size() > 40) return ViaDouble(text, max_micros);
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && text[i] == '-') {
    negative = true;
    ++i;
  }
  int64_t whole = 0;
  size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
    whole = whole * 10 + (text[i] - '0');
    if (whole > static_cast<int64_t>(max_micros)) {
      return HasExponent(text) ? ViaDouble(text, max_micros) : std::nullopt;
    }
  }
  if (digits == 0) return std::nullopt;
  int64_t fraction = 0;
  int fraction_digits = 0;
  bool round_up = false;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (fraction_digits < 3) {
        fraction = fraction * 10 + (text[i] - '0');
        ++fraction_digits;
      } else if (fraction_digits == 3) {
        round_up = text[i] >= '5';
        fraction_digits = 4;
      }
    }
  }
  if (i != text.size()) return HasExponent(text) ? ViaDouble(text, max_micros) : std::nullopt;
  for (int d = std::min(fraction_digits, 3); d < 3; ++d) fraction *= 10;
  int64_t ns = whole * 1000 + fraction + (round_up ? 1 : 0);
  return negative ? -ns : ns;
}

}  // namespace gpuctl::analysis
