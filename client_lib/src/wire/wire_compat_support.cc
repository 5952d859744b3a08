// The schema-independent half of the compatibility tests' support: random
// values. The per-field half (ToProto, FromProto, RandomMember) is generated
// from ipc.proto (ipc_schema_compat.cc).
#include "client_lib/src/wire/wire_compat_support.h"

#include <limits>

namespace gpuctl::wire::testing {

int32_t RandomMessages::Int32() {
  switch (Below(6)) {
    case 0:
      return 0;
    case 1:
      return -1;
    case 2:
      return std::numeric_limits<int32_t>::min();
    case 3:
      return std::numeric_limits<int32_t>::max();
    case 4:
      return static_cast<int32_t>(Below(200)) - 100;
    default:
      return static_cast<int32_t>(rng_());
  }
}

int64_t RandomMessages::Int64() {
  switch (Below(6)) {
    case 0:
      return 0;
    case 1:
      return -1;
    case 2:
      return std::numeric_limits<int64_t>::min();
    case 3:
      return std::numeric_limits<int64_t>::max();
    case 4:
      return static_cast<int64_t>(Below(1u << 20)) - (1 << 19);
    default:
      return static_cast<int64_t>(rng_());
  }
}

uint32_t RandomMessages::Uint32() {
  switch (Below(4)) {
    case 0:
      return 0;
    case 1:
      return std::numeric_limits<uint32_t>::max();
    case 2:
      return static_cast<uint32_t>(Below(300));
    default:
      return static_cast<uint32_t>(rng_());
  }
}

uint64_t RandomMessages::Uint64() {
  switch (Below(4)) {
    case 0:
      return 0;
    case 1:
      return std::numeric_limits<uint64_t>::max();
    case 2:
      return Below(1u << 14);
    default:
      return rng_() >> Below(64);
  }
}

uint32_t RandomMessages::CodePoint() {
  switch (Below(5)) {
    case 0:
      return static_cast<uint32_t>(Below(0x80));  // ASCII, NUL included
    case 1:
      return 0x80 + static_cast<uint32_t>(Below(0x780));  // two bytes
    case 2: {                                             // three bytes, no surrogates
      uint32_t cp = 0x800 + static_cast<uint32_t>(Below(0x10000 - 0x800 - 0x800));
      return cp >= 0xd800 ? cp + 0x800 : cp;
    }
    case 3:
      return 0x10000 + static_cast<uint32_t>(Below(0x100000));  // four bytes
    default:
      return "gpuctl-/._ "[Below(11)];
  }
}

std::string RandomMessages::Utf8String() {
  std::string out;
  if (OneIn(3)) {
    return out;
  }
  const uint64_t length = OneIn(10) ? Below(300) : Below(24);
  for (uint64_t i = 0; i < length; ++i) {
    const uint32_t cp = CodePoint();
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  return out;
}

std::string RandomMessages::Binary() {
  std::string out;
  if (OneIn(4)) {
    return out;
  }
  const uint64_t length = OneIn(8) ? Below(5000) : Below(64);
  for (uint64_t i = 0; i < length; ++i) {
    out.push_back(static_cast<char>(Below(256)));
  }
  return out;
}

std::vector<std::string> RandomMessages::Utf8Strings() {
  std::vector<std::string> out(Below(6));
  for (std::string& value : out) {
    value = Utf8String();
  }
  return out;
}

ClientMessage RandomMessages::Client(int alternative) {
  ClientMessage out;
  RandomMember(*this, Alternative<ClientMessage>(alternative), &out);
  return out;
}

DaemonMessage RandomMessages::Daemon(int alternative) {
  DaemonMessage out;
  RandomMember(*this, Alternative<DaemonMessage>(alternative), &out);
  return out;
}

}  // namespace gpuctl::wire::testing
