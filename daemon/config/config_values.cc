#include "daemon/config/config_values.h"

#include <array>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::daemon {
namespace {

constexpr char kDurationForms[] = "(use 100ms, 10s, 10m, 2h, 30d)";
constexpr char kSizeForms[] =
    "(use bytes, or a whole number with KiB, MiB, GiB, TiB, or KB, MB, GB, TB: 256MiB, 50GiB)";

struct DurationUnit {
  absl::string_view suffix;
  absl::Duration unit;
};
// Longest suffix first: "ms" before "m" and "s".
constexpr std::array<DurationUnit, 5> kDurationUnits = {{{"ms", absl::Milliseconds(1)},
                                                         {"s", absl::Seconds(1)},
                                                         {"m", absl::Minutes(1)},
                                                         {"h", absl::Hours(1)},
                                                         {"d", absl::Hours(24)}}};

struct SizeUnit {
  absl::string_view suffix;
  uint64_t multiplier;
};
constexpr std::array<SizeUnit, 8> kSizeUnits = {{{"KiB", uint64_t{1} << 10},
                                                 {"MiB", uint64_t{1} << 20},
                                                 {"GiB", uint64_t{1} << 30},
                                                 {"TiB", uint64_t{1} << 40},
                                                 {"KB", 1000},
                                                 {"MB", uint64_t{1000} * 1000},
                                                 {"GB", uint64_t{1000} * 1000 * 1000},
                                                 {"TB", uint64_t{1000} * 1000 * 1000 * 1000}}};

// Splits "123unit" into its digits and the rest; false unless the text
// starts with at least one digit.
bool SplitNumber(absl::string_view text, absl::string_view* digits, absl::string_view* unit) {
  size_t n = 0;
  while (n < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[n]))) ++n;
  if (n == 0) return false;
  *digits = text.substr(0, n);
  *unit = text.substr(n);
  return true;
}

// Decimal digits to a number; false on overflow.
bool DigitsToUint64(absl::string_view digits, uint64_t* out) {
  uint64_t value = 0;
  for (char c : digits) {
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

bool LooksNegative(absl::string_view text) {
  return text.size() >= 2 && text[0] == '-' &&
         absl::ascii_isdigit(static_cast<unsigned char>(text[1]));
}

}  // namespace

absl::Status CheckHostName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("a host name must not be empty");
  if (name.size() > kMaxHostNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(QuoteConfigText(name), " is ", name.size(),
                                                   " bytes long, more than ", kMaxHostNameBytes));
  }
  if (!absl::ascii_isalnum(static_cast<unsigned char>(name[0]))) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteConfigText(name), " must start with a letter or digit"));
  }
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteConfigText(name), " holds ", QuoteConfigText(absl::string_view(&c, 1)),
                       ": a host name is letters, digits, '.', '-' and '_'"));
    }
  }
  return absl::OkStatus();
}

std::string QuoteConfigText(absl::string_view text) {
  constexpr size_t kMaxShown = 64;
  if (text.size() <= kMaxShown) return absl::StrCat("\"", absl::CHexEscape(text), "\"");
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMaxShown)), "\"...");
}

absl::StatusOr<absl::Duration> ParseConfigDuration(absl::string_view text) {
  if (text == "0") return absl::ZeroDuration();
  if (LooksNegative(text)) {
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteConfigText(text), " is negative; a duration is 0 or more ", kDurationForms));
  }
  absl::string_view digits, suffix;
  if (SplitNumber(text, &digits, &suffix)) {
    for (const DurationUnit& unit : kDurationUnits) {
      if (suffix != unit.suffix) continue;
      uint64_t amount = 0;
      absl::Duration remainder;
      int64_t max_amount = absl::IDivDuration(kMaxConfigDuration, unit.unit, &remainder);
      if (!DigitsToUint64(digits, &amount) || amount > static_cast<uint64_t>(max_amount)) {
        return absl::InvalidArgumentError(absl::StrCat(
            QuoteConfigText(text), " is too long (at most ", max_amount, unit.suffix, ")"));
      }
      return unit.unit * static_cast<int64_t>(amount);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(QuoteConfigText(text), " is not a duration ", kDurationForms));
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  if (LooksNegative(text)) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteConfigText(text), " is negative; a size is 0 or more bytes"));
  }
  absl::string_view digits, suffix;
  if (SplitNumber(text, &digits, &suffix)) {
    uint64_t multiplier = 0;
    if (suffix.empty()) multiplier = 1;
    for (const SizeUnit& unit : kSizeUnits) {
      if (suffix == unit.suffix) multiplier = unit.multiplier;
    }
    uint64_t amount = 0;
    if (multiplier != 0) {
      if (!DigitsToUint64(digits, &amount) ||
          amount > std::numeric_limits<uint64_t>::max() / multiplier) {
        return absl::InvalidArgumentError(
            absl::StrCat(QuoteConfigText(text), " is too large for a size"));
      }
      return amount * multiplier;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(QuoteConfigText(text), " is not a size ", kSizeForms));
}

absl::StatusOr<uint64_t> ParseConfigCount(absl::string_view text) {
  if (LooksNegative(text)) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteConfigText(text), " is negative; expected 0 or more"));
  }
  absl::string_view digits, rest;
  uint64_t value = 0;
  if (!SplitNumber(text, &digits, &rest) || !rest.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteConfigText(text), " is not a whole number"));
  }
  if (!DigitsToUint64(digits, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(QuoteConfigText(text), " is too large"));
  }
  return value;
}

std::string FormatByteSize(uint64_t bytes) {
  if (bytes == 0) return "0";
  // Largest unit first, binary before decimal at the same magnitude.
  static constexpr std::array<int, 8> kOrder = {3, 7, 2, 6, 1, 5, 0, 4};
  for (int i : kOrder) {
    const SizeUnit& unit = kSizeUnits[static_cast<size_t>(i)];
    if (bytes % unit.multiplier == 0) return absl::StrCat(bytes / unit.multiplier, unit.suffix);
  }
  return absl::StrCat(bytes);
}

std::string FormatConfigDuration(absl::Duration d) {
  int64_t ms = absl::ToInt64Milliseconds(d);
  if (ms <= 0) return "0";
  for (auto it = kDurationUnits.rbegin(); it != kDurationUnits.rend(); ++it) {
    int64_t unit_ms = absl::ToInt64Milliseconds(it->unit);
    if (ms % unit_ms == 0) return absl::StrCat(ms / unit_ms, it->suffix);
  }
  return absl::StrCat(ms, "ms");
}

}  // namespace gpuctl::daemon
