#ifndef GPUCTL_DAEMON_ANALYSIS_TESTING_TRACE_BUILDER_H_
#define GPUCTL_DAEMON_ANALYSIS_TESTING_TRACE_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpuctl::analysis::testing {

// Writes Chrome-trace JSON in gpuctl's layout (docs/trace-format.md), or
// kineto's (no `gpuctl` member), for hand-built diagnosis tests. Times are
// ns; they are written as µs with three decimals, as both writers do.
class TraceBuilder {
 public:
  static constexpr int64_t kPid = 4242, kTid = 4243;

  // gpuctl's metadata member; without it the file is kineto's.
  struct Meta {
    int64_t rank = 0;
    uint64_t dropped_events = 0, cupti_dropped_records = 0, dropped_at_cap = 0;
    bool host_only = false;
    std::string host_only_reason{};
    bool cupti_failed = false;
    std::string cupti_message{};
    std::vector<std::string> activities = {"kernel", "memcpy", "memset", "runtime", "sync"};
    int64_t window_start_ns = 0, window_end_ns = 10'000'000'000;
    std::string trace_id{"0190c0de-0000-7000-8000-000000000001"};
    // Written as baseTimeNanoseconds (also without the gpuctl member).
    int64_t base_time_ns = 0;
  };
  TraceBuilder& Gpuctl(const Meta& meta);

  TraceBuilder& Kernel(const std::string& name, int64_t start, int64_t dur, uint64_t correlation,
                       int64_t stream = 7, int64_t device = 0);
  TraceBuilder& Memcpy(const std::string& name, int64_t start, int64_t dur, uint64_t correlation,
                       uint64_t bytes, int64_t stream = 7);
  TraceBuilder& Memset(int64_t start, int64_t dur, uint64_t correlation, uint64_t bytes,
                       int64_t stream = 7);
  TraceBuilder& Runtime(const std::string& name, int64_t start, int64_t dur, uint64_t correlation,
                        int64_t tid = kTid);
  TraceBuilder& Sync(const std::string& name, int64_t start, int64_t dur, uint64_t correlation,
                     int64_t stream = 7);
  TraceBuilder& Range(const std::string& name, int64_t start, int64_t dur, int64_t tid = kTid,
                      const std::string& cat = "user_annotation");
  TraceBuilder& Step(int64_t number, int64_t start, int64_t dur, int64_t tid = kTid);
  // Any event text, added as is.
  TraceBuilder& Raw(const std::string& event_json);

  std::string Json() const;

 private:
  void Complete(const std::string& cat, const std::string& name, int64_t pid, int64_t tid,
                int64_t start, int64_t dur, const std::string& args);

  bool gpuctl_ = false;
  Meta meta_;
  std::vector<std::string> events_;
};

// `json` gzip-compressed as `members` gzip members of about equal size.
std::string GzipMembers(const std::string& json, int members);

}  // namespace gpuctl::analysis::testing

#endif  // GPUCTL_DAEMON_ANALYSIS_TESTING_TRACE_BUILDER_H_
