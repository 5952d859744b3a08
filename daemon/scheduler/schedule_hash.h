#ifndef GPUCTL_DAEMON_SCHEDULER_SCHEDULE_HASH_H_
#define GPUCTL_DAEMON_SCHEDULER_SCHEDULE_HASH_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuctl::daemon::scheduler {

// What a schedule hash decides about: a time slot, a block of steps or an
// anomaly rule's step bucket. Part of the hashed input, so a time slot and
// a step block of the same index never share a decision.
enum class HashDomain : uint8_t { kTimeSlot = 't', kStepBlock = 's', kAnomalyBucket = 'a' };

using ScheduleDigest = std::array<uint8_t, 32>;

// The schedule's one source of randomness, identical on every host and in
// every version of gpuctld: SHA-256 (FIPS 180-4) of
//   "gpuctl-schedule-v1" 0x00, the domain byte,
//   then seed, rule and job each as a 4-byte big-endian length and bytes,
//   then `index` as 8 bytes big-endian (two's complement).
// Changing this changes which slots every fleet samples: the test vectors
// in schedule_hash_test.cc pin it.
ScheduleDigest ScheduleHash(HashDomain domain, absl::string_view seed, absl::string_view rule,
                            absl::string_view job, int64_t index);

// The digest's bytes [0, 8) as a number in [0, 1): the top 53 bits of the
// big-endian integer times 2^-53, exact in a double.
double DigestUniform(const ScheduleDigest& digest);

// The digest's bytes [8, 16), big-endian: the start offset's source.
uint64_t DigestOffsetBits(const ScheduleDigest& digest);

// The digest's bytes [16, 26): the random part of a derived trace id.
std::array<uint8_t, 10> DigestIdBits(const ScheduleDigest& digest);

// Lowercase hex of SHA-256(`text`), for fingerprints.
std::string Sha256Hex(absl::string_view text);

}  // namespace gpuctl::daemon::scheduler

#endif  // GPUCTL_DAEMON_SCHEDULER_SCHEDULE_HASH_H_
