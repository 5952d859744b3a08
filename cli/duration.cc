#include "cli/duration.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::cli {
namespace {

constexpr absl::string_view kExamples = "e.g. 5s, 500ms, 2m or 1m30s";

// Length of the unit at the front of `s`, 0 when there is none.
size_t UnitLength(absl::string_view s) {
  for (absl::string_view unit : {"ms", "us", "ns", "h", "m", "s"}) {
    if (absl::StartsWith(s, unit)) return unit.size();
  }
  return 0;
}

// Checks the grammar ([0-9]+(\.[0-9]+)?unit)+ and returns a reason on
// failure; absl::ParseDuration then does the arithmetic.
absl::Status CheckGrammar(absl::string_view text) {
  absl::string_view rest = text;
  while (!rest.empty()) {
    size_t i = 0;
    while (i < rest.size() && absl::ascii_isdigit(rest[i])) ++i;
    if (i == 0) return absl::InvalidArgumentError("expected a number");
    if (i < rest.size() && rest[i] == '.') {
      size_t j = i + 1;
      while (j < rest.size() && absl::ascii_isdigit(rest[j])) ++j;
      if (j == i + 1) return absl::InvalidArgumentError("expected digits after '.'");
      i = j;
    }
    rest.remove_prefix(i);
    if (rest.empty()) return absl::InvalidArgumentError("a unit is required (h, m, s, ms, us)");
    size_t unit = UnitLength(rest);
    if (unit == 0) return absl::InvalidArgumentError("unknown unit (use h, m, s, ms, us)");
    rest.remove_prefix(unit);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<absl::Duration> ParseUserDuration(absl::string_view text, bool allow_zero) {
  auto fail = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid duration \"", text, "\": ", why, "; ", kExamples));
  };
  if (text.empty()) return fail("empty");
  if (text[0] == '-') return fail("must be positive");
  if (text[0] == '+') return fail("no sign allowed");
  if (absl::Status grammar = CheckGrammar(text); !grammar.ok()) {
    return fail(grammar.message());
  }
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d == absl::InfiniteDuration()) {
    return fail("out of range");
  }
  if (d < absl::ZeroDuration() || (d == absl::ZeroDuration() && !allow_zero)) {
    return fail("must be greater than zero");
  }
  if (d > kMaxUserDuration) {
    return fail(
        absl::StrCat("longer than the ", absl::FormatDuration(kMaxUserDuration), " maximum"));
  }
  return d;
}

std::string FormatUserDuration(absl::Duration d) { return absl::FormatDuration(d); }

}  // namespace gpuctl::cli
