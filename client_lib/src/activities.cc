#include "client_lib/src/activities.h"

#include "gpuctl/v1/records.h"

namespace gpuctl::client {
namespace {

struct NamedActivity {
  const char* name;
  uint32_t bit;
};

constexpr NamedActivity kActivities[] = {
    {"kernel", records::kActivityKernel}, {"memcpy", records::kActivityMemcpy},
    {"memset", records::kActivityMemset}, {"runtime", records::kActivityRuntime},
    {"driver", records::kActivityDriver}, {"sync", records::kActivitySync},
    {"nvtx", records::kActivityNvtx},     {"overhead", records::kActivityOverhead},
    {"memory", records::kActivityMemory},
};

}  // namespace

bool ParseActivities(const std::vector<std::string>& names, uint32_t* mask, std::string* unknown) {
  if (names.empty()) {
    *mask = records::kDefaultActivities;
    return true;
  }
  *mask = 0;
  for (const std::string& name : names) {
    bool found = false;
    for (const NamedActivity& a : kActivities) {
      if (name == a.name) {
        *mask |= a.bit;
        found = true;
      }
    }
    if (!found) {
      *unknown = name;
      return false;
    }
  }
  return true;
}

std::string KnownActivityNames() { return ActivityNames(~0u); }

std::string ActivityNames(uint32_t mask) {
  std::string out;
  for (const NamedActivity& a : kActivities) {
    if ((mask & a.bit) == 0) continue;
    if (!out.empty()) out += ",";
    out += a.name;
  }
  return out;
}

}  // namespace gpuctl::client
