// The GPU activity names of StartCapture.activities and their
// records::kActivity* bits.
#ifndef GPUCTL_CLIENT_LIB_SRC_ACTIVITIES_H_
#define GPUCTL_CLIENT_LIB_SRC_ACTIVITIES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpuctl::client {

// Sets `mask` from `names`; an empty list gives records::kDefaultActivities.
// Returns false with `unknown` set at the first name it does not know.
bool ParseActivities(const std::vector<std::string>& names, uint32_t* mask, std::string* unknown);
// "kernel, memcpy, ..." for messages.
std::string KnownActivityNames();
// Comma-separated names of the bits in `mask`.
std::string ActivityNames(uint32_t mask);

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_ACTIVITIES_H_
