#include "cli/duration.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::cli {
namespace {

constexpr absl::string_view kExamples = "e.g. 5s, 500ms, 2m or 1m30s";

constexpr absl::string_view kUnits = "h, m, s, ms, us, ns";

bool IsUnit(absl::string_view word) {
  for (absl::string_view unit : {"h", "m", "s", "ms", "us", "ns"}) {
    if (word == unit) return true;
  }
  return false;
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
    if (rest.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("a unit is required (units: ", kUnits, ")"));
    }
    // The unit is every letter up to the next number: "5sec" has unit "sec".
    size_t letters = 0;
    while (letters < rest.size() && absl::ascii_isalpha(rest[letters])) ++letters;
    const absl::string_view unit = rest.substr(0, letters);
    if (!IsUnit(unit)) {
      return absl::InvalidArgumentError(
          unit.empty() ? absl::StrCat("expected a unit after the number (units: ", kUnits, ")")
                       : absl::StrCat("unknown unit \"", unit, "\" (units: ", kUnits, ")"));
    }
    rest.remove_prefix(letters);
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
