#ifndef GPUCTL_DAEMON_ANALYSIS_HOST_EVENTS_H_
#define GPUCTL_DAEMON_ANALYSIS_HOST_EVENTS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace gpuctl::analysis {

// gpuctld's host context in a trace (docs/trace-format.md, "Host context"):
// CPU samples ("cpu_sample" instants) and off-CPU slices ("off_cpu") of the
// traced process's threads and of its helper processes, reduced to what the
// diagnoses read. Names are indices into TraceModel::names; kNoName when
// absent.
inline constexpr uint32_t kNoName = std::numeric_limits<uint32_t>::max();

enum class OffCpuKind : uint8_t { kBlocked, kPreempted, kUnknown };

struct CpuSampleEvent {
  int64_t ts_ns = 0;
  int64_t pid = 0, tid = 0;
  uint32_t top = kNoName;  // the innermost frame
};

struct OffCpuSlice {
  int64_t start_ns = 0, end_ns = 0;
  int64_t pid = 0, tid = 0;
  // The innermost frame the thread left the CPU in and its caller
  // (args.stack[0] and [1]).
  uint32_t top = kNoName, caller = kNoName;
  // args.preempted_by: the process that took the CPU, as gpuctld named it.
  uint32_t preempted_by = kNoName;
  OffCpuKind kind = OffCpuKind::kUnknown;
};

// A thread_name or process_name metadata event (tid 0 for a process).
struct TrackName {
  int64_t pid = 0, tid = 0;
  uint32_t name = kNoName;
};

struct HostEvents {
  std::vector<CpuSampleEvent> samples;  // sorted by (tid, ts)
  std::vector<OffCpuSlice> off_cpu;     // sorted by (tid, start)
  std::vector<TrackName> threads, processes;
  bool empty() const { return samples.empty() && off_cpu.empty(); }
};

// Gathers the host context events of one traceEvents element at a time,
// as the trace reader delivers its parts. Keeps no string
// beyond the event being read.
class HostEventCollector {
 public:
  using Intern = absl::FunctionRef<uint32_t(absl::string_view)>;

  void BeginEvent();
  void OnCategory(absl::string_view cat);
  void OnArgKey(absl::string_view key);
  // Whether the member whose key came last matters here.
  bool WantsArg() const { return key_ != Key::kOther; }
  // A string in the event's args: a member's value (`in_array` false) or an
  // element of a member's array.
  void OnArgString(absl::string_view value, bool in_array);
  // The event's other fields, once it ends. Returns whether it was a host
  // context event (taken, or skipped when malformed, counted in `skipped`).
  bool EndEvent(char ph, absl::string_view name, bool has_ts, int64_t ts_ns, int64_t dur_ns,
                int64_t pid, int64_t tid, Intern intern, HostEvents* out, uint64_t* skipped);

 private:
  enum class Kind : uint8_t { kNone, kSample, kOffCpu };
  enum class Key : uint8_t { kOther, kStack, kReason, kPreemptedBy, kName };

  Kind kind_ = Kind::kNone;
  Key key_ = Key::kOther;
  int stack_frames_ = 0;
  std::string top_, caller_, reason_, preempted_by_, arg_name_;
};

// Sorts the events as HostEvents documents.
void SortHostEvents(HostEvents* events);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_HOST_EVENTS_H_
