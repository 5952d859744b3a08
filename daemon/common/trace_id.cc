#include "daemon/common/trace_id.h"

#include <array>
#include <cstdint>

#include "absl/random/distributions.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"

namespace gpuctl {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";
constexpr int64_t kMaxUnixMillis = (int64_t{1} << 48) - 1;

bool IsHyphenPosition(size_t i) { return i == 8 || i == 13 || i == 18 || i == 23; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string GenerateTraceId(absl::Time now, absl::BitGenRef random) {
  uint64_t hi = absl::Uniform<uint64_t>(random);
  uint64_t lo = absl::Uniform<uint64_t>(random);
  std::array<uint8_t, 10> bits{};
  for (int i = 0; i < 2; ++i) bits[i] = static_cast<uint8_t>(hi >> (8 * i));
  for (int i = 0; i < 8; ++i) bits[2 + i] = static_cast<uint8_t>(lo >> (8 * i));
  return FormatTraceId(now, bits);
}

std::string FormatTraceId(absl::Time time, const std::array<uint8_t, 10>& random) {
  int64_t ms = absl::ToUnixMillis(time);
  if (ms < 0) ms = 0;
  if (ms > kMaxUnixMillis) ms = kMaxUnixMillis;

  std::array<uint8_t, 16> bytes{};
  for (int i = 0; i < 6; ++i) {
    bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(ms) >> (8 * (5 - i)));
  }
  for (size_t i = 0; i < random.size(); ++i) bytes[6 + i] = random[i];
  bytes[6] = static_cast<uint8_t>(0x70 | (bytes[6] & 0x0f));  // version 7
  bytes[8] = static_cast<uint8_t>(0x80 | (bytes[8] & 0x3f));  // variant 10

  std::string id;
  id.reserve(kTraceIdLength);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) id.push_back('-');
    id.push_back(kHexDigits[bytes[i] >> 4]);
    id.push_back(kHexDigits[bytes[i] & 0xf]);
  }
  return id;
}

bool IsValidTraceId(absl::string_view id) {
  if (id.size() != kTraceIdLength) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    if (IsHyphenPosition(i)) {
      if (id[i] != '-') return false;
    } else if (HexValue(id[i]) < 0) {
      return false;
    }
  }
  if (id[14] != '7') return false;
  int variant = HexValue(id[19]);
  return (variant & 0xc) == 0x8;
}

int64_t TraceIdUnixMillis(absl::string_view id) {
  int64_t ms = 0;
  // The first 12 hex digits (positions 0-7 and 9-12) hold the timestamp.
  for (size_t i = 0; i < 13; ++i) {
    if (i == 8) continue;
    ms = (ms << 4) | HexValue(id[i]);
  }
  return ms;
}

absl::StatusOr<absl::Time> TraceIdTime(absl::string_view id) {
  if (!IsValidTraceId(id)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid trace id \"", Excerpt(id), "\""));
  }
  return absl::FromUnixMillis(TraceIdUnixMillis(id));
}

}  // namespace gpuctl
