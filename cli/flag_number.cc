#include "cli/flag_number.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/format.h"

namespace gpuctl::cli {
namespace {

// Past this a bound is not worth saying: nobody types 2147483647 on purpose.
constexpr uint64_t kUnsaidMax = std::numeric_limits<int32_t>::max();

std::string RangeWords(uint64_t min, uint64_t max) {
  if (max >= kUnsaidMax) {
    if (min == 0) return "an integer, 0 or more";
    if (min == 1) return "a positive integer";
    return absl::StrCat("an integer, ", min, " or more");
  }
  return absl::StrCat("an integer from ", min, " to ", max);
}

}  // namespace

absl::StatusOr<uint64_t> ParseFlagNumber(absl::string_view flag, absl::string_view text,
                                         absl::string_view what, uint64_t min, uint64_t max) {
  uint64_t value = 0;
  const bool digits = !text.empty() && text.size() <= 20 &&
                      std::all_of(text.begin(), text.end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(text, &value) || value < min || value > max) {
    // At most a line of what was typed.
    const absl::string_view shown = text.substr(0, 64);
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": expected ", what, ", ", RangeWords(min, max), ", got \"",
                     Printable(shown), shown.size() < text.size() ? "..." : "", "\""));
  }
  return value;
}

}  // namespace gpuctl::cli
