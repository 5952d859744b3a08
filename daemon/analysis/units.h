#ifndef GPUCTL_DAEMON_ANALYSIS_UNITS_H_
#define GPUCTL_DAEMON_ANALYSIS_UNITS_H_

#include <cstdint>
#include <string>

namespace gpuctl::analysis {

// "812 ns", "12.4 us", "3.21 ms", "1.50 s": three significant digits.
std::string FormatNs(int64_t ns);
// "12.5%" of part in whole; "0.0%" when whole is 0.
std::string FormatShare(int64_t part, int64_t whole);
double SharePct(int64_t part, int64_t whole);
// "1.2 GB", "340 MB", "12 KB", "512 B" (powers of 1000).
std::string FormatBytes(uint64_t bytes);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_UNITS_H_
