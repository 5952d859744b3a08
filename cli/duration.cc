#include "cli/duration.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::cli {
namespace {

constexpr absl::string_view kExamples = "e.g. 5s, 500ms, 2m or 1m30s";

constexpr absl::string_view kUnits = "h, m, s, ms, us, ns";
constexpr absl::string_view kLookbackUnits = "d, h, m, s, ms, us, ns";

bool IsUnit(absl::string_view word, bool days) {
  if (days && word == "d") return true;
  for (absl::string_view unit : {"h", "m", "s", "ms", "us", "ns"}) {
    if (word == unit) return true;
  }
  return false;
}

// Checks the grammar ([0-9]+(\.[0-9]+)?unit)+ (units with "d" when `days`)
// and returns a reason on failure; absl::ParseDuration then does the
// arithmetic.
absl::Status CheckGrammar(absl::string_view text, bool days = false) {
  const absl::string_view units = days ? kLookbackUnits : kUnits;
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
      return absl::InvalidArgumentError(absl::StrCat("a unit is required (units: ", units, ")"));
    }
    // The unit is every letter up to the next number: "5sec" has unit "sec".
    size_t letters = 0;
    while (letters < rest.size() && absl::ascii_isalpha(rest[letters])) ++letters;
    const absl::string_view unit = rest.substr(0, letters);
    if (!IsUnit(unit, days)) {
      return absl::InvalidArgumentError(
          unit.empty() ? absl::StrCat("expected a unit after the number (units: ", units, ")")
                       : absl::StrCat("unknown unit \"", unit, "\" (units: ", units, ")"));
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

absl::StatusOr<absl::Duration> ParseLookback(absl::string_view text) {
  auto fail = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid duration \"", text, "\": ", why, "; e.g. 6h, 7d or 1d12h"));
  };
  if (text.empty()) return fail("empty");
  if (text[0] == '-') return fail("must be positive");
  if (text[0] == '+') return fail("no sign allowed");
  if (absl::Status grammar = CheckGrammar(text, /*days=*/true); !grammar.ok()) {
    return fail(grammar.message());
  }
  // Term by term: absl::ParseDuration knows no days; a day is 24h here
  // (UTC, as the bucket's day prefixes).
  absl::Duration total;
  absl::string_view rest = text;
  while (!rest.empty()) {
    size_t number = 0;
    while (number < rest.size() && !absl::ascii_isalpha(rest[number])) ++number;
    size_t unit = number;
    while (unit < rest.size() && absl::ascii_isalpha(rest[unit])) ++unit;
    const bool day = rest.substr(number, unit - number) == "d";
    const std::string term =
        absl::StrCat(rest.substr(0, number), day ? "h" : rest.substr(number, unit - number));
    absl::Duration d;
    if (!absl::ParseDuration(term, &d) || d == absl::InfiniteDuration()) {
      return fail("out of range");
    }
    total += day ? d * 24 : d;
    if (total > kMaxLookback) break;
    rest.remove_prefix(unit);
  }
  if (total <= absl::ZeroDuration()) return fail("must be greater than zero");
  if (total > kMaxLookback) return fail("longer than the 366d maximum");
  return total;
}

std::string FormatUserDuration(absl::Duration d) { return absl::FormatDuration(d); }

}  // namespace gpuctl::cli
