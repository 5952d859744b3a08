#include "daemon/scheduler/schedule_hash.h"

#include <openssl/evp.h>

#include <cstdlib>
#include <string>

namespace gpuctl::daemon::scheduler {
namespace {

constexpr absl::string_view kHashDomainTag = "gpuctl-schedule-v1";

void AppendBigEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>(value >> (8 * i)));
}

void AppendField(absl::string_view field, std::string* out) {
  AppendBigEndian(field.size(), 4, out);
  out->append(field.data(), field.size());
}

ScheduleDigest Sha256(absl::string_view text) {
  ScheduleDigest digest{};
  unsigned int size = 0;
  // Cannot fail for SHA-256 into a buffer of its size: a failure is a
  // broken libcrypto, and a schedule decided from a zero digest would be
  // silently wrong on this host alone.
  if (EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    std::abort();
  }
  return digest;
}

uint64_t ReadBigEndian64(const ScheduleDigest& digest, size_t offset) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) value = (value << 8) | digest[offset + i];
  return value;
}

}  // namespace

ScheduleDigest ScheduleHash(HashDomain domain, absl::string_view seed, absl::string_view rule,
                            absl::string_view job, int64_t index) {
  std::string input;
  input.reserve(kHashDomainTag.size() + 2 + 12 + seed.size() + rule.size() + job.size() + 8);
  input.append(kHashDomainTag.data(), kHashDomainTag.size());
  input.push_back('\0');
  input.push_back(static_cast<char>(domain));
  AppendField(seed, &input);
  AppendField(rule, &input);
  AppendField(job, &input);
  AppendBigEndian(static_cast<uint64_t>(index), 8, &input);
  return Sha256(input);
}

double DigestUniform(const ScheduleDigest& digest) {
  constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;
  return static_cast<double>(ReadBigEndian64(digest, 0) >> 11) * kTwoToMinus53;
}

uint64_t DigestOffsetBits(const ScheduleDigest& digest) { return ReadBigEndian64(digest, 8); }

std::array<uint8_t, 10> DigestIdBits(const ScheduleDigest& digest) {
  std::array<uint8_t, 10> bits{};
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = digest[16 + i];
  return bits;
}

std::string Sha256Hex(absl::string_view text) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t byte : Sha256(text)) {
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 0xf]);
  }
  return hex;
}

}  // namespace gpuctl::daemon::scheduler
