// Test support for wire_compat_test: conversions between the codec's structs
// and the libprotobuf messages of ipc.proto, and random message generation.
// What depends on the fields is generated from ipc.proto with the codec
// (ipc_schema_compat.cc): a new field is converted and randomized with no
// edit here.
#ifndef GPUCTL_CLIENT_LIB_SRC_WIRE_WIRE_COMPAT_SUPPORT_H_
#define GPUCTL_CLIENT_LIB_SRC_WIRE_WIRE_COMPAT_SUPPORT_H_

#include <cstdint>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "client_lib/src/wire/ipc_messages.h"
#include "gpuctl/v1/ipc.pb.h"

namespace gpuctl::wire::testing {

namespace pb = ::gpuctl::v1::ipc;

pb::ClientMessage ToProto(const ClientMessage& message);
pb::DaemonMessage ToProto(const DaemonMessage& message);
ClientMessage FromProto(const pb::ClientMessage& message);
DaemonMessage FromProto(const pb::DaemonMessage& message);

class RandomMessages;
// Sets *out to the datagram's alternative `index` (0: std::monostate) with
// every field drawn from `random`.
void RandomMember(RandomMessages& random, uint64_t index, ClientMessage* out);
void RandomMember(RandomMessages& random, uint64_t index, DaemonMessage* out);

// Random values biased toward edges: defaults (so omission is exercised),
// negative and extreme integers, empty, ASCII, multi-byte and NUL-bearing
// UTF-8 strings, and arbitrary binary bytes.
class RandomMessages {
 public:
  explicit RandomMessages(uint64_t seed) : rng_(seed) {}

  // `alternative` picks the oneof member (variant index); -1 picks at random.
  ClientMessage Client(int alternative = -1);
  DaemonMessage Daemon(int alternative = -1);

  int32_t Int32();
  int64_t Int64();
  uint32_t Uint32();
  uint64_t Uint64();
  bool Bool() { return OneIn(2); }
  std::string Utf8String();
  std::vector<std::string> Utf8Strings();  // 0-5 elements
  std::string Binary();
  uint64_t Below(uint64_t bound) {
    return std::uniform_int_distribution<uint64_t>(0, bound - 1)(rng_);
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  bool OneIn(int n) { return Below(n) == 0; }
  template <typename Variant>
  uint64_t Alternative(int alternative) {
    return alternative < 0 ? Below(std::variant_size_v<Variant>)
                           : static_cast<uint64_t>(alternative);
  }
  uint32_t CodePoint();

  std::mt19937_64 rng_;
};

}  // namespace gpuctl::wire::testing

#endif  // GPUCTL_CLIENT_LIB_SRC_WIRE_WIRE_COMPAT_SUPPORT_H_
