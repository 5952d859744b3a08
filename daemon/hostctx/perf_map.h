#ifndef GPUCTL_DAEMON_HOSTCTX_PERF_MAP_H_
#define GPUCTL_DAEMON_HOSTCTX_PERF_MAP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpuctl::hostctx {

// A perf map (/tmp/perf-<pid>.map, written by JIT runtimes: Python 3.12+
// with -X perf, Node with --perf-basic-prof): one "START SIZE name" line per
// generated function, START and SIZE in hex. The file is the process's to
// forge: lines that do not parse are skipped, the count and names bounded.
class PerfMap {
 public:
  static constexpr size_t kMaxEntries = 1 << 20;
  static constexpr size_t kMaxNameBytes = 512;

  static PerfMap Parse(absl::string_view text);

  struct Entry {
    uint64_t start = 0;
    uint64_t size = 0;
    std::string name;
  };
  // An entry whose range holds `address`; of entries that start at the same
  // address, the one written last (a runtime that reuses code memory
  // appends the new function).
  const Entry* Find(uint64_t address) const;
  size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;  // sorted by start
};

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_PERF_MAP_H_
