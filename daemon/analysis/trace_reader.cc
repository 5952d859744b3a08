#include "daemon/analysis/trace_reader.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/analysis/event_names.h"
#include "daemon/analysis/host_events.h"
#include "daemon/analysis/micros_text.h"
#include "daemon/analysis/trace_input_chars.h"
#include "daemon/common/excerpt.h"
#include "nlohmann/json.hpp"

namespace gpuctl::analysis {
namespace {

using SaxJson = nlohmann::json;

// |ts| and |dur| beyond this many µs (285 years) are rejected: ns fit int64.
constexpr double kMaxMicros = 9e12;
// Events longer than this, or further than this from the file's first
// event, are skipped: a capture spans minutes, and the bound keeps every
// sum of times over a file's events within int64.
constexpr int64_t kMaxExtentNs = 10'000'000'000'000;  // 2.8 hours

enum class Category : uint8_t {
  kOther,
  kKernel,
  kMemcpy,
  kMemset,
  kSync,
  kRuntime,
  kDriver,
  kAnnotation,
  kCpuOp,
  kTraceSpan,
  kGpuMemory,   // gpuctl's device memory counter and instants
  kCpuInstant,  // kineto's instants, among them PyTorch's "[memory]"
};

Category ClassifyCategory(absl::string_view cat) {
  if (cat == "kernel" || cat == "Kernel") return Category::kKernel;
  if (cat == "gpu_memcpy" || cat == "Memcpy") return Category::kMemcpy;
  if (cat == "gpu_memset" || cat == "Memset") return Category::kMemset;
  if (cat == "cuda_sync") return Category::kSync;
  if (cat == "cuda_runtime" || cat == "Runtime") return Category::kRuntime;
  if (cat == "cuda_driver") return Category::kDriver;
  if (cat == "user_annotation") return Category::kAnnotation;
  if (cat == "cpu_op" || cat == "Operator") return Category::kCpuOp;
  if (cat == "Trace") return Category::kTraceSpan;
  if (cat == "gpu_memory") return Category::kGpuMemory;
  if (cat == "cpu_instant_event") return Category::kCpuInstant;
  return Category::kOther;
}

// One traceEvents element as it is read.
struct PendingEvent {
  char ph = 0;
  Category category = Category::kOther;
  std::string name;
  bool has_ts = false, has_dur = false, bad_time = false;
  int64_t ts_ns = 0, dur_ns = 0;
  int64_t pid = 0, tid = 0;
  bool has_device = false, has_stream = false, has_sync_stream = false;
  int64_t device = 0, stream = 0, sync_stream = 0;
  uint64_t correlation = 0, bytes = 0;
  bool graph = false;
  // Device memory: gpuctl's counter value ("bytes", signed), kineto's
  // "[memory]" args.
  bool has_signed_bytes = false, has_total_allocated = false, has_memory_device = false;
  int64_t signed_bytes = 0, total_allocated = 0, memory_device = 0, device_type = -1;
  // A kernel's launch args; grid and block as the products of their arrays.
  bool has_launch = false, has_grid = false, has_block = false;
  uint64_t grid = 1, block = 1;
  KernelLaunch launch;
};

enum class TopKey : uint8_t { kOther, kEvents, kGpuctl, kDistributed, kBaseTime, kDevices };
enum class EventKey : uint8_t { kOther, kPh, kCat, kName, kPid, kTid, kTs, kDur, kArgs };
enum class ArgKey : uint8_t {
  kOther,
  kDevice,
  kStream,
  kSyncStream,
  kCorrelation,
  kBytes,
  kGraphId,
  kTotalAllocated,
  kDeviceId,
  kDeviceType,
  kBlocksPerSm,
  kWarpsPerSm,
  kOccupancy,
  kGrid,
  kBlock,
  kRegisters,
  kSharedMemory,
};

TopKey ClassifyTopKey(absl::string_view k) {
  if (k == "traceEvents") return TopKey::kEvents;
  if (k == "gpuctl") return TopKey::kGpuctl;
  if (k == "distributedInfo") return TopKey::kDistributed;
  if (k == "baseTimeNanoseconds") return TopKey::kBaseTime;
  if (k == "deviceProperties") return TopKey::kDevices;
  return TopKey::kOther;
}

EventKey ClassifyEventKey(absl::string_view k) {
  if (k == "ph") return EventKey::kPh;
  if (k == "cat") return EventKey::kCat;
  if (k == "name") return EventKey::kName;
  if (k == "pid") return EventKey::kPid;
  if (k == "tid") return EventKey::kTid;
  if (k == "ts") return EventKey::kTs;
  if (k == "dur") return EventKey::kDur;
  if (k == "args") return EventKey::kArgs;
  return EventKey::kOther;
}

ArgKey ClassifyArgKey(absl::string_view k) {
  if (k == "device") return ArgKey::kDevice;
  if (k == "stream") return ArgKey::kStream;
  if (k == "sync stream") return ArgKey::kSyncStream;
  if (k == "correlation") return ArgKey::kCorrelation;
  if (k == "bytes") return ArgKey::kBytes;
  if (k == "graph id") return ArgKey::kGraphId;
  if (k == "Total Allocated") return ArgKey::kTotalAllocated;
  if (k == "Device Id") return ArgKey::kDeviceId;
  if (k == "Device Type") return ArgKey::kDeviceType;
  if (k == "blocks per SM") return ArgKey::kBlocksPerSm;
  if (k == "warps per SM") return ArgKey::kWarpsPerSm;
  if (k == "est. achieved occupancy %") return ArgKey::kOccupancy;
  if (k == "grid") return ArgKey::kGrid;
  if (k == "block") return ArgKey::kBlock;
  if (k == "registers per thread") return ArgKey::kRegisters;
  if (k == "shared memory") return ArgKey::kSharedMemory;
  return ArgKey::kOther;
}

// A JSON scalar as the SAX interface delivers it.
struct Scalar {
  enum class Type : uint8_t { kNull, kBool, kInt, kFloat, kString } type = Type::kNull;
  int64_t i = 0;                      // kInt, kBool
  bool fits = true;                   // kInt: the value fits int64
  double d = 0;                       // kInt, kFloat
  const std::string* text = nullptr;  // kFloat: as written; kString
};

// nlohmann-json SAX handler. Levels: 1 the top object, 2 a top-level
// member's value (traceEvents, gpuctl...), 3 an event, 4 its args.
class TraceSax {
 public:
  explicit TraceSax(TraceInputChars* stream, TraceModel* model) : stream_(stream), model_(model) {}

  bool null() { return OnScalar(Scalar{}); }
  bool boolean(bool v) { return OnScalar(Scalar{Scalar::Type::kBool, v ? 1 : 0}); }
  bool number_integer(SaxJson::number_integer_t v) {
    return OnScalar(Scalar{Scalar::Type::kInt, v, true, static_cast<double>(v)});
  }
  bool number_unsigned(SaxJson::number_unsigned_t v) {
    bool fits = v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    return OnScalar(Scalar{Scalar::Type::kInt, fits ? static_cast<int64_t>(v) : 0, fits,
                           static_cast<double>(v)});
  }
  bool number_float(SaxJson::number_float_t v, const std::string& text) {
    return OnScalar(Scalar{Scalar::Type::kFloat, 0, true, v, &text});
  }
  bool string(std::string& v) { return OnScalar(Scalar{Scalar::Type::kString, 0, true, 0, &v}); }
  bool binary(SaxJson::binary_t& /*v*/) { return Fail("a binary value"); }
  bool start_object(size_t /*elements*/) { return Start(/*object=*/true); }
  bool start_array(size_t /*elements*/) { return Start(/*object=*/false); }
  bool end_object() { return End(); }
  bool end_array() { return End(); }
  bool key(std::string& k);
  bool parse_error(size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex);

  absl::Status Finish();
  const absl::Status& status() const { return status_; }

 private:
  bool Fail(absl::string_view what) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("not a trace: ", what, " at byte ", stream_->offset()));
    }
    return false;
  }
  bool InEvent() const { return in_events_ && depth_ == 3; }
  bool InArgs() const { return in_events_ && depth_ == 4 && event_key_ == EventKey::kArgs; }
  bool Start(bool object);
  bool End();
  bool OnScalar(const Scalar& v);
  void OnEventScalar(const Scalar& v);
  void OnArgScalar(const Scalar& v);
  void OnLaunchArg(const Scalar& v, int64_t i);
  void OnLaunchArrayScalar(const Scalar& v);
  bool InLaunchArray() const {
    return in_events_ && depth_ == 5 && event_key_ == EventKey::kArgs &&
           (arg_key_ == ArgKey::kGrid || arg_key_ == ArgKey::kBlock);
  }
  uint32_t InternLaunch(const PendingEvent& e);
  void OnGpuctlScalar(const Scalar& v);
  void OnDeviceScalar(const Scalar& v);
  void EndEvent();
  void EndMemoryEvent(const PendingEvent& e);
  uint32_t Intern(const std::string& name);

  TraceInputChars* stream_;
  TraceModel* model_;
  absl::Status status_;
  int depth_ = 0;
  bool done_ = false, seen_events_ = false, in_events_ = false;
  TopKey top_ = TopKey::kOther;
  EventKey event_key_ = EventKey::kOther;
  ArgKey arg_key_ = ArgKey::kOther;
  std::string member_key_;  // a key of gpuctl or distributedInfo
  PendingEvent event_;
  bool gpuctl_window_ = false, gpuctl_window_end_ = false;
  int64_t gpuctl_window_start_abs_ = 0, gpuctl_window_end_abs_ = 0;
  bool has_anchor_ = false;
  int64_t anchor_ns_ = 0;  // the first timed event's start
  bool has_span_ = false;
  int64_t span_start_ = 0, span_end_ = 0;
  int64_t distributed_rank_ = -1, distributed_world_ = -1;
  absl::flat_hash_map<std::string, uint32_t> name_index_;
  absl::flat_hash_map<std::tuple<float, float, int32_t, uint32_t, uint32_t, uint32_t, uint64_t>,
                      uint32_t>
      launch_index_;
  DeviceMemoryTotal device_;  // the deviceProperties element being read
  HostEventCollector host_;
};

bool TraceSax::key(std::string& k) {
  if (depth_ == 1) {
    top_ = ClassifyTopKey(k);
    if (top_ == TopKey::kEvents) {
      if (seen_events_) return Fail("a second traceEvents");
      seen_events_ = true;
    }
  } else if (InEvent()) {
    event_key_ = ClassifyEventKey(k);
  } else if (InArgs()) {
    arg_key_ = ClassifyArgKey(k);
    host_.OnArgKey(k);
  } else if (depth_ == 2 || (depth_ == 3 && top_ == TopKey::kDevices)) {
    member_key_ = k;
  }
  return true;
}

bool TraceSax::Start(bool object) {
  if (done_) return Fail("content after the top-level object");
  if (depth_ == 0 && !object) return Fail("the top level is not an object");
  if (depth_ == 1) {
    if (top_ == TopKey::kEvents) {
      if (object) return Fail("traceEvents is not an array");
      in_events_ = true;
    } else if (top_ == TopKey::kGpuctl && object) {
      model_->info.format = TraceFormat::kGpuctl;  // confirmed by its window below
    }
  } else if (depth_ == 2 && in_events_) {
    if (!object) return Fail("a traceEvents element is not an object");
    event_ = PendingEvent{};
    event_key_ = EventKey::kOther;
    host_.BeginEvent();
  } else if (depth_ == 2 && top_ == TopKey::kDevices && object) {
    ++model_->info.device_count;
    device_ = DeviceMemoryTotal{-1, 0};
  }
  ++depth_;
  return true;
}

bool TraceSax::End() {
  if (InEvent()) EndEvent();
  if (depth_ == 3 && top_ == TopKey::kDevices && device_.device >= 0 && device_.bytes > 0) {
    model_->device_memory.push_back(device_);
  }
  --depth_;
  if (depth_ == 1 && in_events_) in_events_ = false;
  if (depth_ == 1) top_ = TopKey::kOther;
  if (depth_ == 0) done_ = true;
  return true;
}

bool TraceSax::OnScalar(const Scalar& v) {
  if (depth_ == 0) return Fail("the top level is not an object");
  if (depth_ == 1) {
    if (top_ == TopKey::kEvents) return Fail("traceEvents is not an array");
    if (top_ == TopKey::kBaseTime && v.type == Scalar::Type::kInt && v.fits) {
      model_->info.base_time_ns = v.i;
    }
    return true;
  }
  if (depth_ == 2 && in_events_) return Fail("a traceEvents element is not an object");
  if (in_events_ && (depth_ == 4 || depth_ == 5) && event_key_ == EventKey::kArgs &&
      v.type == Scalar::Type::kString) {
    host_.OnArgString(*v.text, /*in_array=*/depth_ == 5);
  }
  if (InEvent()) {
    OnEventScalar(v);
  } else if (InArgs()) {
    OnArgScalar(v);
  } else if (InLaunchArray()) {
    OnLaunchArrayScalar(v);
  } else if (top_ == TopKey::kGpuctl) {
    OnGpuctlScalar(v);
  } else if (top_ == TopKey::kDevices && depth_ == 3) {
    OnDeviceScalar(v);
  } else if (top_ == TopKey::kDistributed && depth_ == 2 && v.type == Scalar::Type::kInt) {
    if (member_key_ == "rank") distributed_rank_ = v.i;
    if (member_key_ == "world_size") distributed_world_ = v.i;
  }
  return true;
}

// An integer from a number or a numeric string (kineto writes some ids as
// strings).
std::optional<int64_t> AsInt(const Scalar& v) {
  if (v.type == Scalar::Type::kInt && v.fits) return v.i;
  if (v.type == Scalar::Type::kFloat && std::isfinite(v.d) && std::fabs(v.d) < 9e18) {
    return static_cast<int64_t>(v.d);
  }
  if (v.type == Scalar::Type::kString) {
    int64_t i = 0;
    if (absl::SimpleAtoi(*v.text, &i)) return i;
  }
  return std::nullopt;
}

std::optional<int64_t> AsNanos(const Scalar& v) {
  if (v.type == Scalar::Type::kInt) {
    if (!v.fits || v.i > static_cast<int64_t>(kMaxMicros) ||
        v.i < -static_cast<int64_t>(kMaxMicros)) {
      return std::nullopt;
    }
    return v.i * 1000;
  }
  if (v.type == Scalar::Type::kFloat) return MicrosTextToNanos(*v.text, kMaxMicros);
  return std::nullopt;
}

void TraceSax::OnEventScalar(const Scalar& v) {
  PendingEvent& e = event_;
  switch (event_key_) {
    case EventKey::kPh:
      if (v.type == Scalar::Type::kString && v.text->size() == 1) e.ph = (*v.text)[0];
      break;
    case EventKey::kCat:
      if (v.type == Scalar::Type::kString) {
        e.category = ClassifyCategory(*v.text);
        host_.OnCategory(*v.text);
      }
      break;
    case EventKey::kName:
      if (v.type == Scalar::Type::kString) e.name = *v.text;
      break;
    case EventKey::kPid:
      e.pid = AsInt(v).value_or(0);
      break;
    case EventKey::kTid:
      e.tid = AsInt(v).value_or(0);
      break;
    case EventKey::kTs:
    case EventKey::kDur: {
      std::optional<int64_t> ns = AsNanos(v);
      if (!ns.has_value()) {
        e.bad_time = true;
      } else if (event_key_ == EventKey::kTs) {
        e.has_ts = true;
        e.ts_ns = *ns;
      } else {
        e.has_dur = true;
        e.dur_ns = *ns;
      }
      break;
    }
    case EventKey::kArgs:
    case EventKey::kOther:
      break;
  }
}

void TraceSax::OnArgScalar(const Scalar& v) {
  std::optional<int64_t> i = AsInt(v);
  if (!i.has_value()) return;
  switch (arg_key_) {
    case ArgKey::kDevice:
      event_.has_device = true;
      event_.device = *i;
      break;
    case ArgKey::kStream:
      event_.has_stream = true;
      event_.stream = *i;
      break;
    case ArgKey::kSyncStream:
      event_.has_sync_stream = true;
      event_.sync_stream = *i;
      break;
    case ArgKey::kCorrelation:
      event_.correlation = static_cast<uint64_t>(*i);
      break;
    case ArgKey::kBytes:
      event_.bytes = *i > 0 ? static_cast<uint64_t>(*i) : 0;
      event_.has_signed_bytes = true;
      event_.signed_bytes = *i;
      break;
    case ArgKey::kTotalAllocated:
      event_.has_total_allocated = true;
      event_.total_allocated = *i;
      break;
    case ArgKey::kDeviceId:
      event_.has_memory_device = true;
      event_.memory_device = *i;
      break;
    case ArgKey::kDeviceType:
      event_.device_type = *i;
      break;
    case ArgKey::kGraphId:
      event_.graph = *i != 0;
      break;
    case ArgKey::kBlocksPerSm:
    case ArgKey::kWarpsPerSm:
    case ArgKey::kOccupancy:
    case ArgKey::kGrid:
    case ArgKey::kBlock:
    case ArgKey::kRegisters:
    case ArgKey::kSharedMemory:
      OnLaunchArg(v, *i);
      break;
    case ArgKey::kOther:
      break;
  }
}

void TraceSax::OnGpuctlScalar(const Scalar& v) {
  TraceInfo& info = model_->info;
  if (depth_ == 3) {  // the activities array
    if (member_key_ == "activities" && v.type == Scalar::Type::kString) {
      info.activities.push_back(*v.text);
    }
    return;
  }
  if (depth_ != 2) return;
  const std::string& k = member_key_;
  const bool is_string = v.type == Scalar::Type::kString;
  int64_t n = 0;
  bool has_n = false;
  if (std::optional<int64_t> i = AsInt(v); !is_string && i.has_value()) {
    n = *i;
    has_n = true;
  }
  auto count = [&] { return has_n && n > 0 ? static_cast<uint64_t>(n) : uint64_t{0}; };
  if (k == "trace_id" && is_string) info.trace_id = *v.text;
  if (k == "host" && is_string) info.host = *v.text;
  if (k == "pid" && has_n) info.pid = n;
  if (k == "rank" && has_n) info.rank = n;
  if (k == "world_size" && has_n) info.world_size = n;
  if (k == "dropped_events") info.dropped_events = count();
  if (k == "cupti_dropped_records") info.cupti_dropped_records = count();
  if (k == "dropped_at_cap") info.dropped_at_cap = count();
  if (k == "host_only") info.host_only = v.type == Scalar::Type::kBool && v.i != 0;
  if (k == "host_only_reason" && is_string) info.host_only_reason = *v.text;
  if (k == "cupti_failed") info.cupti_failed = v.type == Scalar::Type::kBool && v.i != 0;
  if (k == "cupti_message" && is_string) info.cupti_message = *v.text;
  if (k == "window_start_ns" && has_n) {
    gpuctl_window_ = true;
    gpuctl_window_start_abs_ = n;
  }
  if (k == "window_end_ns" && has_n) {
    gpuctl_window_end_ = true;
    gpuctl_window_end_abs_ = n;
  }
}

void TraceSax::OnDeviceScalar(const Scalar& v) {
  std::optional<int64_t> i = AsInt(v);
  if (!i.has_value() || *i < 0) return;
  if (member_key_ == "id" && *i <= INT32_MAX) device_.device = static_cast<int32_t>(*i);
  if (member_key_ == "totalGlobalMem") device_.bytes = static_cast<uint64_t>(*i);
}

void TraceSax::OnLaunchArg(const Scalar& v, int64_t i) {
  // Products beyond this are nonsense from the file; they saturate here.
  constexpr uint64_t kMaxProduct = uint64_t{1} << 48;
  PendingEvent& e = event_;
  KernelLaunch& l = e.launch;
  const double d = v.type == Scalar::Type::kString ? static_cast<double>(i) : v.d;
  const bool count = i >= 0 && i <= std::numeric_limits<int32_t>::max();
  switch (arg_key_) {
    case ArgKey::kBlocksPerSm:
    case ArgKey::kWarpsPerSm:
      if (!std::isfinite(d) || d < 0 || d > 1e9) return;
      (arg_key_ == ArgKey::kBlocksPerSm ? l.blocks_per_sm : l.warps_per_sm) = static_cast<float>(d);
      break;
    case ArgKey::kOccupancy:
      if (i < 0 || i > 100) return;
      l.occupancy_pct = static_cast<int32_t>(i);
      break;
    case ArgKey::kGrid:
    case ArgKey::kBlock: {
      if (i < 0) return;
      const bool grid = arg_key_ == ArgKey::kGrid;
      uint64_t& product = grid ? e.grid : e.block;
      const uint64_t dim = static_cast<uint64_t>(i);
      product = dim != 0 && product > kMaxProduct / dim ? kMaxProduct : product * dim;
      (grid ? e.has_grid : e.has_block) = true;
      break;
    }
    case ArgKey::kRegisters:
      if (count) l.registers_per_thread = static_cast<uint32_t>(i);
      break;
    case ArgKey::kSharedMemory:
      if (count) l.shared_memory_bytes = static_cast<uint32_t>(i);
      break;
    default:
      return;
  }
  e.has_launch = true;
}

void TraceSax::OnLaunchArrayScalar(const Scalar& v) {
  if (std::optional<int64_t> i = AsInt(v); i.has_value()) OnLaunchArg(v, *i);
}

uint32_t TraceSax::InternLaunch(const PendingEvent& e) {
  KernelLaunch l = e.launch;
  if (e.has_grid) l.grid_blocks = e.grid;
  if (e.has_block) l.block_threads = static_cast<uint32_t>(std::min<uint64_t>(e.block, 1u << 30));
  const auto key =
      std::make_tuple(l.blocks_per_sm, l.warps_per_sm, l.occupancy_pct, l.block_threads,
                      l.registers_per_thread, l.shared_memory_bytes, l.grid_blocks);
  auto [it, inserted] =
      launch_index_.try_emplace(key, static_cast<uint32_t>(model_->launches.size()));
  if (inserted) model_->launches.push_back(l);
  return it->second;
}

uint32_t TraceSax::Intern(const std::string& name) {
  auto [it, inserted] = name_index_.try_emplace(name, static_cast<uint32_t>(model_->names.size()));
  if (inserted) model_->names.push_back(name);
  return it->second;
}

void TraceSax::EndEvent() {
  PendingEvent& e = event_;
  TraceInfo& info = model_->info;
  ++info.events;
  if (e.ph == 'C' || e.ph == 'i' || e.ph == 'I') EndMemoryEvent(e);
  if (host_.EndEvent(
          e.ph, e.name, e.has_ts && !e.bad_time, e.ts_ns, e.dur_ns, e.pid, e.tid,
          [this](absl::string_view s) { return Intern(std::string(s)); }, &model_->host,
          &info.skipped_events)) {
    return;
  }
  if (e.ph != 'X') return;  // metadata, instants, flows, counters
  if (!e.has_ts || e.bad_time || e.dur_ns < 0 || e.dur_ns > kMaxExtentNs) {
    ++info.skipped_events;
    return;
  }
  if (!has_anchor_) {
    has_anchor_ = true;
    anchor_ns_ = e.ts_ns;
  }
  if (e.ts_ns < anchor_ns_ - kMaxExtentNs || e.ts_ns > anchor_ns_ + kMaxExtentNs) {
    ++info.skipped_events;
    return;
  }
  const int64_t start = e.ts_ns, end = e.ts_ns + e.dur_ns;
  switch (e.category) {
    case Category::kKernel:
    case Category::kMemcpy:
    case Category::kMemset: {
      GpuOp op;
      op.start_ns = start;
      op.end_ns = end;
      op.name = Intern(e.name);
      op.correlation = e.correlation;
      op.device = static_cast<int32_t>(e.has_device ? e.device : e.pid);
      op.stream = e.has_stream ? e.stream : e.tid;
      op.bytes = e.bytes;
      op.graph = e.graph;
      if (e.category == Category::kKernel && e.has_launch) op.launch = InternLaunch(e);
      if (e.category == Category::kKernel) {
        op.kind = IsCommunicationKernel(e.name) ? GpuOpKind::kCommKernel : GpuOpKind::kKernel;
      } else {
        op.kind = e.category == Category::kMemcpy ? GpuOpKind::kMemcpy : GpuOpKind::kMemset;
        CopyName copy = ParseCopyName(e.name);
        op.direction = copy.direction;
        op.pageable = copy.pageable;
      }
      model_->gpu_ops.push_back(op);
      break;
    }
    case Category::kSync:
      // gpuctl writes a synchronization's stream as "sync stream" ("stream"
      // -1); kineto and gpuctl's older files as "stream".
      model_->syncs.push_back(SyncRecord{start, end, e.correlation, Intern(e.name),
                                         static_cast<int32_t>(e.has_device ? e.device : -1),
                                         e.has_sync_stream ? e.sync_stream
                                         : e.has_stream    ? e.stream
                                                           : -1});
      break;
    case Category::kRuntime:
    case Category::kDriver:
      model_->api_calls.push_back(ApiCall{start, end, e.correlation, e.pid, e.tid, Intern(e.name),
                                          ClassifyApiCall(e.name)});
      break;
    case Category::kAnnotation:
    case Category::kCpuOp:
      if (std::optional<int64_t> step = ParseStepName(e.name); step.has_value()) {
        model_->steps.push_back(Step{start, end, *step, e.pid, e.tid});
      } else {
        model_->ranges.push_back(
            HostRange{start, end, e.pid, e.tid, Intern(e.name), e.category == Category::kCpuOp});
      }
      break;
    case Category::kTraceSpan:
      span_start_ = has_span_ ? std::min(span_start_, start) : start;
      span_end_ = has_span_ ? std::max(span_end_, end) : end;
      has_span_ = true;
      break;
    case Category::kGpuMemory:  // EndMemoryEvent's
    case Category::kCpuInstant:
    case Category::kOther:
      break;
  }
}

// gpuctl's "Device memory allocated (GPU N)" counter samples (pid: the
// device), and PyTorch's "[memory]" instants of CUDA memory (Device Type 1)
// with the caching allocator's "Total Allocated".
void TraceSax::EndMemoryEvent(const PendingEvent& e) {
  MemorySample sample;
  if (e.ph == 'C' && e.category == Category::kGpuMemory && e.has_signed_bytes) {
    sample = MemorySample{e.ts_ns, e.signed_bytes, static_cast<int32_t>(e.pid), false};
  } else if (e.ph != 'C' && e.category == Category::kCpuInstant && e.name == "[memory]" &&
             e.device_type == 1 && e.has_total_allocated && e.has_memory_device) {
    sample = MemorySample{e.ts_ns, e.total_allocated, static_cast<int32_t>(e.memory_device), true};
  } else {
    return;
  }
  if (!e.has_ts || e.bad_time || e.pid < INT32_MIN || e.pid > INT32_MAX || e.memory_device < 0 ||
      e.memory_device > INT32_MAX ||
      (has_anchor_ &&
       (e.ts_ns < anchor_ns_ - kMaxExtentNs || e.ts_ns > anchor_ns_ + kMaxExtentNs))) {
    ++model_->info.skipped_events;
    return;
  }
  model_->memory.push_back(sample);
}

bool TraceSax::parse_error(size_t position, const std::string& last_token,
                           const nlohmann::detail::exception& ex) {
  if (!status_.ok()) return false;  // the handler stopped the parse
  std::string what = ex.what();
  size_t colon = what.find(": ");
  if (colon != std::string::npos) what.erase(0, colon + 2);
  size_t last_read = what.find("; last read");
  if (last_read != std::string::npos) what.erase(last_read);
  status_ = absl::InvalidArgumentError(
      absl::StrCat("malformed JSON at byte ", position == 0 ? 0 : position - 1, ": ",
                   Excerpt(what, 200), " (near '", Excerpt(last_token), "')"));
  return false;
}

absl::Status TraceSax::Finish() {
  if (!done_) return absl::InvalidArgumentError("not a trace: no top-level object");
  if (!seen_events_) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a trace: no traceEvents array (at byte ", stream_->offset(), ")"));
  }
  TraceInfo& info = model_->info;
  // gpuctl's files carry the capture window; a kineto file tagged by gpuctld
  // has a `gpuctl` member without one.
  if (info.format == TraceFormat::kGpuctl && !gpuctl_window_) info.format = TraceFormat::kKineto;
  info.has_gpuctl_meta = info.format == TraceFormat::kGpuctl;
  if (gpuctl_window_ && gpuctl_window_end_ && gpuctl_window_end_abs_ >= gpuctl_window_start_abs_) {
    info.has_window = true;
    info.window_start_ns = gpuctl_window_start_abs_ - info.base_time_ns;
    info.window_end_ns = gpuctl_window_end_abs_ - info.base_time_ns;
  } else if (has_span_) {
    info.has_window = true;
    info.window_start_ns = span_start_;
    info.window_end_ns = span_end_;
  }
  info.has_activities = info.has_gpuctl_meta;
  if (info.rank < 0) info.rank = distributed_rank_;
  if (info.world_size < 0) info.world_size = distributed_world_;
  return absl::OkStatus();
}

void SortModel(TraceModel& m) {
  std::sort(m.gpu_ops.begin(), m.gpu_ops.end(), [](const GpuOp& a, const GpuOp& b) {
    return std::tie(a.device, a.stream, a.start_ns, a.end_ns) <
           std::tie(b.device, b.stream, b.start_ns, b.end_ns);
  });
  auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
  std::stable_sort(m.api_calls.begin(), m.api_calls.end(), by_start);
  std::stable_sort(m.syncs.begin(), m.syncs.end(), by_start);
  std::stable_sort(m.steps.begin(), m.steps.end(), by_start);
  std::stable_sort(
      m.memory.begin(), m.memory.end(), [](const MemorySample& a, const MemorySample& b) {
        return std::tie(a.device, a.allocator, a.ts_ns) < std::tie(b.device, b.allocator, b.ts_ns);
      });
  std::sort(
      m.device_memory.begin(), m.device_memory.end(),
      [](const DeviceMemoryTotal& a, const DeviceMemoryTotal& b) { return a.device < b.device; });
  std::sort(m.ranges.begin(), m.ranges.end(), [](const HostRange& a, const HostRange& b) {
    return std::tie(a.pid, a.tid, a.start_ns, b.end_ns) <
           std::tie(b.pid, b.tid, b.start_ns, a.end_ns);
  });
  m.gpu_ops.shrink_to_fit();
  m.api_calls.shrink_to_fit();
  m.ranges.shrink_to_fit();
}

}  // namespace

absl::StatusOr<TraceModel> ReadTrace(TraceInput input, const std::string& name) {
  TraceModel model;
  model.info.path = name;
  TraceInputChars stream(&input);
  TraceSax sax(&stream, &model);
  bool parsed = false;
  try {
    parsed = SaxJson::sax_parse(TraceInputIterator(&stream), TraceInputIterator(), &sax);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": malformed JSON at byte ",
                                                   stream.offset(), ": ", Excerpt(e.what(), 200)));
  }
  // A decompression error ends the parser's input early: it is the cause.
  if (!input.status().ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", input.status().message()));
  }
  if (!parsed) {
    if (!sax.status().ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", sax.status().message()));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": malformed JSON at byte ", stream.offset()));
  }
  if (absl::Status s = sax.Finish(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  model.info.gzip = input.gzip();
  SortModel(model);
  SortHostEvents(&model.host);
  return model;
}

absl::StatusOr<TraceModel> ReadTraceFile(const std::string& path) {
  absl::StatusOr<TraceInput> input = TraceInput::OpenFile(path);
  if (!input.ok()) return input.status();
  return ReadTrace(*std::move(input), path);
}

absl::StatusOr<TraceModel> ReadTraceBytes(absl::string_view bytes, const std::string& name) {
  return ReadTrace(TraceInput::FromBytes(bytes), name);
}

}  // namespace gpuctl::analysis
