#include "daemon/analysis/trace_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
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
#include "daemon/analysis/trace_json_stream.h"
#include "simdjson.h"

namespace gpuctl::analysis {
namespace {

namespace od = simdjson::ondemand;

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

Category ClassifyCategory(std::string_view cat) {
  switch (cat.size()) {
    case 6:
      if (Is(cat, "kernel") || Is(cat, "Kernel")) return Category::kKernel;
      if (Is(cat, "cpu_op")) return Category::kCpuOp;
      if (Is(cat, "Memcpy")) return Category::kMemcpy;
      if (Is(cat, "Memset")) return Category::kMemset;
      break;
    case 10:
      if (Is(cat, "gpu_memcpy")) return Category::kMemcpy;
      if (Is(cat, "gpu_memset")) return Category::kMemset;
      if (Is(cat, "gpu_memory")) return Category::kGpuMemory;
      break;
    case 12:
      if (Is(cat, "cuda_runtime")) return Category::kRuntime;
      break;
    default:
      if (Is(cat, "cuda_sync")) return Category::kSync;
      if (Is(cat, "Runtime")) return Category::kRuntime;
      if (Is(cat, "cuda_driver")) return Category::kDriver;
      if (Is(cat, "user_annotation")) return Category::kAnnotation;
      if (Is(cat, "Operator")) return Category::kCpuOp;
      if (Is(cat, "Trace")) return Category::kTraceSpan;
      if (Is(cat, "cpu_instant_event")) return Category::kCpuInstant;
      break;
  }
  return Category::kOther;
}

// One traceEvents element as it is read.
struct PendingEvent {
  char ph = 0;
  Category category = Category::kOther;
  absl::string_view name;  // into the piece being parsed: valid during OnEvent
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
  int64_t total_reserved = -1;  // kineto's "Total Reserved"; -1 absent
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
  kTotalReserved,
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

TopKey ClassifyTopKey(std::string_view k) {
  if (Is(k, "traceEvents")) return TopKey::kEvents;
  if (Is(k, "gpuctl")) return TopKey::kGpuctl;
  if (Is(k, "distributedInfo")) return TopKey::kDistributed;
  if (Is(k, "baseTimeNanoseconds")) return TopKey::kBaseTime;
  if (Is(k, "deviceProperties")) return TopKey::kDevices;
  return TopKey::kOther;
}

EventKey ClassifyEventKey(std::string_view k) {
  switch (k.size()) {
    case 2:
      if (Is(k, "ph")) return EventKey::kPh;
      if (Is(k, "ts")) return EventKey::kTs;
      break;
    case 3:
      if (Is(k, "cat")) return EventKey::kCat;
      if (Is(k, "pid")) return EventKey::kPid;
      if (Is(k, "tid")) return EventKey::kTid;
      if (Is(k, "dur")) return EventKey::kDur;
      break;
    case 4:
      if (Is(k, "name")) return EventKey::kName;
      if (Is(k, "args")) return EventKey::kArgs;
      break;
    default:
      break;
  }
  return EventKey::kOther;
}

ArgKey ClassifyArgKey(std::string_view k) {
  switch (k.size()) {
    case 4:
      if (Is(k, "grid")) return ArgKey::kGrid;
      break;
    case 5:
      if (Is(k, "bytes")) return ArgKey::kBytes;
      if (Is(k, "block")) return ArgKey::kBlock;
      break;
    case 6:
      if (Is(k, "device")) return ArgKey::kDevice;
      if (Is(k, "stream")) return ArgKey::kStream;
      break;
    case 8:
      if (Is(k, "graph id")) return ArgKey::kGraphId;
      break;
    case 9:
      if (Is(k, "Device Id")) return ArgKey::kDeviceId;
      break;
    case 11:
      if (Is(k, "correlation")) return ArgKey::kCorrelation;
      if (Is(k, "sync stream")) return ArgKey::kSyncStream;
      if (Is(k, "Device Type")) return ArgKey::kDeviceType;
      break;
    case 12:
      if (Is(k, "warps per SM")) return ArgKey::kWarpsPerSm;
      break;
    case 13:
      if (Is(k, "blocks per SM")) return ArgKey::kBlocksPerSm;
      if (Is(k, "shared memory")) return ArgKey::kSharedMemory;
      break;
    case 14:
      if (Is(k, "Total Reserved")) return ArgKey::kTotalReserved;
      break;
    case 15:
      if (Is(k, "Total Allocated")) return ArgKey::kTotalAllocated;
      break;
    case 20:
      if (Is(k, "registers per thread")) return ArgKey::kRegisters;
      break;
    case 25:
      if (Is(k, "est. achieved occupancy %")) return ArgKey::kOccupancy;
      break;
    default:
      break;
  }
  return ArgKey::kOther;
}

// A JSON scalar as read from a value.
struct Scalar {
  enum class Type : uint8_t { kNull, kBool, kInt, kFloat, kString } type = Type::kNull;
  int64_t i = 0;           // kInt, kBool
  bool fits = true;        // kInt: the value fits int64
  double d = 0;            // kInt; kFloat when has_double (else NumberValue())
  absl::string_view text;  // kFloat: as written; kString
  bool has_double = false;
};

simdjson::error_code ReadNumber(od::value v, Scalar* out, bool want_double) {
  const std::string_view raw = TokenText(v);
  // A fraction or exponent keeps its text: times are read from it exactly
  // (MicrosTextToNanos), and a double is made only where one is used.
  for (char c : raw) {
    if (c == '.' || c == 'e' || c == 'E') {
      *out = Scalar{Scalar::Type::kFloat, 0, true, 0, AsAbsl(raw), false};
      out->has_double = want_double && v.get_double().get(out->d) == simdjson::SUCCESS;
      return simdjson::SUCCESS;
    }
  }
  int64_t i = 0;
  if (v.get_int64().get(i) == simdjson::SUCCESS) {
    *out = Scalar{Scalar::Type::kInt, i, true, static_cast<double>(i), {}, false};
    return simdjson::SUCCESS;
  }
  uint64_t u = 0;
  if (v.get_uint64().get(u) == simdjson::SUCCESS) {
    *out = Scalar{Scalar::Type::kInt, 0, false, static_cast<double>(u), {}, false};
    return simdjson::SUCCESS;
  }
  // An integer past 64 bits is still a number.
  double d = 0;
  if (!absl::SimpleAtod(AsAbsl(raw), &d)) return simdjson::NUMBER_ERROR;
  *out = Scalar{Scalar::Type::kFloat, 0, true, d, AsAbsl(raw), true};
  return simdjson::SUCCESS;
}

// A number's value as a double (NaN when a float's text is not one).
double NumberValue(const Scalar& v) {
  if (v.type != Scalar::Type::kFloat || v.has_double) return v.d;
  double d = 0;
  return absl::SimpleAtod(v.text, &d) ? d : std::nan("");
}

// Reads `v` when it is a scalar; *is_scalar is false for an array or object
// (left unread).
simdjson::error_code ReadScalar(od::value v, Scalar* out, bool* is_scalar,
                                bool want_double = false) {
  od::json_type type;
  if (simdjson::error_code e = v.type().get(type); e != simdjson::SUCCESS) return e;
  *is_scalar = true;
  switch (type) {
    case od::json_type::string: {
      // In place when it has no escape (names rarely do); else unescaped.
      const std::string_view token = TokenText(v);  // with its quotes
      std::string_view text;
      if (token.size() >= 2 && token.back() == '"' &&
          std::memchr(token.data() + 1, '\\', token.size() - 2) == nullptr) {
        text = token.substr(1, token.size() - 2);
      } else if (simdjson::error_code e = v.get_string().get(text); e != simdjson::SUCCESS) {
        return e;
      }
      *out = Scalar{Scalar::Type::kString, 0, true, 0, AsAbsl(text), false};
      return simdjson::SUCCESS;
    }
    case od::json_type::number:
      return ReadNumber(v, out, want_double);
    case od::json_type::boolean: {
      bool b = false;
      if (simdjson::error_code e = v.get_bool().get(b); e != simdjson::SUCCESS) return e;
      *out = Scalar{Scalar::Type::kBool, b ? 1 : 0, true, 0, {}, false};
      return simdjson::SUCCESS;
    }
    case od::json_type::null: {
      bool null = false;
      if (simdjson::error_code e = v.is_null().get(null); e != simdjson::SUCCESS) return e;
      *out = Scalar{};
      return simdjson::SUCCESS;
    }
    case od::json_type::array:
    case od::json_type::object:
      break;
  }
  *is_scalar = false;
  return simdjson::SUCCESS;
}

// The length of the JSON number at the start of `text` when it is written
// plainly: -?(0|[1-9][0-9]*)(.[0-9]+)?, no exponent; 0 when it is not one.
// `integer` is set when it has no fraction.
size_t PlainNumberLength(std::string_view text, bool* integer) {
  auto digit = [&](size_t at) { return at < text.size() && text[at] >= '0' && text[at] <= '9'; };
  size_t i = !text.empty() && text[0] == '-' ? 1 : 0;
  if (!digit(i)) return 0;
  if (text[i++] != '0') {
    while (digit(i)) ++i;
  } else if (digit(i)) {
    return 0;  // a leading zero
  }
  *integer = true;
  if (i < text.size() && text[i] == '.') {
    *integer = false;
    if (!digit(++i)) return 0;
    while (digit(i)) ++i;
  }
  return i;
}

// `token` as an integer when it is a plain JSON integer of at most 18
// digits (always within int64); nullopt for anything else.
std::optional<int64_t> PlainInteger(std::string_view token) {
  bool integer = false;
  if (token.size() > 18 || PlainNumberLength(token, &integer) != token.size() || !integer) {
    return std::nullopt;
  }
  int64_t n = 0;
  for (char c : token) {
    if (c != '-') n = n * 10 + (c - '0');
  }
  return token[0] == '-' ? -n : n;
}

// Whether events of phase `ph` are only counted: complete events, metadata,
// counters and instants are read; 0 (not read yet) is not ignored.
bool IgnoredPhase(char ph) {
  return ph != 0 && ph != 'X' && ph != 'M' && ph != 'C' && ph != 'i' && ph != 'I';
}

// Builds the model from the document's parts as TraceJsonVisitor delivers
// them.
class TraceVisitor : public TraceJsonVisitor {
 public:
  explicit TraceVisitor(TraceModel* model) : model_(model) {}

  simdjson::error_code OnTopMember(std::string_view key, od::value value) override;
  simdjson::error_code OnEvent(od::object event) override;
  void SaveTop() override { saved_ = Top{model_->info, model_->device_memory.size(), top_}; }
  void RestoreTop() override {
    model_->info = saved_.info;
    model_->device_memory.resize(saved_.device_memory);
    top_ = saved_.state;
  }

  void Finish();

 private:
  // What the top-level members set besides the model's info.
  struct TopState {
    bool gpuctl_window = false, gpuctl_window_end = false;
    int64_t gpuctl_window_start_abs = 0, gpuctl_window_end_abs = 0;
    int64_t distributed_rank = -1, distributed_world = -1;
  };
  struct Top {
    TraceInfo info;
    size_t device_memory = 0;
    TopState state;
  };

  simdjson::error_code OnArgs(od::object args);
  simdjson::error_code OnArgNested(od::value value);
  void OnEventScalar(EventKey key, const Scalar& v);
  bool OnPlainEventScalar(EventKey key, std::string_view token);
  void OnArgScalar(const Scalar& v);
  void OnLaunchArg(const Scalar& v, int64_t i);
  void OnLaunchArrayScalar(const Scalar& v);
  uint32_t InternLaunch(const PendingEvent& e);
  simdjson::error_code OnGpuctl(od::object gpuctl);
  void OnGpuctlScalar(std::string_view k, const Scalar& v);
  simdjson::error_code OnDevices(od::array devices);
  void OnDeviceScalar(std::string_view k, const Scalar& v, DeviceMemoryTotal* device);
  void EndEvent();
  void EndMemoryEvent(const PendingEvent& e);
  uint32_t Intern(absl::string_view name);

  TraceModel* model_;
  TopState top_;
  Top saved_;
  ArgKey arg_key_ = ArgKey::kOther;
  PendingEvent event_;
  bool has_anchor_ = false;
  int64_t anchor_ns_ = 0;  // the first timed event's start
  bool has_span_ = false;
  int64_t span_start_ = 0, span_end_ = 0;
  // What an interned name says as an API call, a kernel or a copy, worked
  // out once per name.
  struct NameTraits {
    ApiKind api;
    bool communication;
    CopyName copy;
  };
  absl::flat_hash_map<std::string, uint32_t> name_index_;
  std::vector<NameTraits> traits_;  // by name index
  absl::flat_hash_map<std::tuple<float, float, int32_t, uint32_t, uint32_t, uint32_t, uint64_t>,
                      uint32_t>
      launch_index_;
  HostEventCollector host_;
};

simdjson::error_code TraceVisitor::OnTopMember(std::string_view key, od::value value) {
  const TopKey top = ClassifyTopKey(key);
  if (top == TopKey::kOther || top == TopKey::kEvents) return simdjson::SUCCESS;
  od::json_type type;
  GPUCTL_JSON_TRY(value.type().get(type));
  switch (top) {
    case TopKey::kGpuctl:
      if (type != od::json_type::object) return simdjson::SUCCESS;
      model_->info.format = TraceFormat::kGpuctl;  // confirmed by its window in Finish()
      return OnGpuctl(value.get_object().value_unsafe());
    case TopKey::kDevices:
      if (type != od::json_type::array) return simdjson::SUCCESS;
      return OnDevices(value.get_array().value_unsafe());
    case TopKey::kDistributed: {
      if (type != od::json_type::object) return simdjson::SUCCESS;
      od::object distributed;
      GPUCTL_JSON_TRY(value.get_object().get(distributed));
      for (auto member : distributed) {
        GPUCTL_JSON_TRY(member.error());
        od::field& field = FieldOf(member);
        std::string_view k;
        GPUCTL_JSON_TRY(KeyOf(field, &k));
        if (k != "rank" && k != "world_size") continue;
        Scalar v;
        bool scalar = false;
        GPUCTL_JSON_TRY(ReadScalar(field.value(), &v, &scalar));
        if (!scalar || v.type != Scalar::Type::kInt) continue;
        (k == "rank" ? top_.distributed_rank : top_.distributed_world) = v.i;
      }
      return simdjson::SUCCESS;
    }
    case TopKey::kBaseTime: {
      Scalar v;
      bool scalar = false;
      GPUCTL_JSON_TRY(ReadScalar(value, &v, &scalar));
      if (scalar && v.type == Scalar::Type::kInt && v.fits) model_->info.base_time_ns = v.i;
      return simdjson::SUCCESS;
    }
    case TopKey::kEvents:
    case TopKey::kOther:
      break;
  }
  return simdjson::SUCCESS;
}

simdjson::error_code TraceVisitor::OnGpuctl(od::object gpuctl) {
  for (auto member : gpuctl) {
    GPUCTL_JSON_TRY(member.error());
    od::field& field = FieldOf(member);
    std::string_view k;
    GPUCTL_JSON_TRY(KeyOf(field, &k));
    Scalar v;
    bool scalar = false;
    GPUCTL_JSON_TRY(ReadScalar(field.value(), &v, &scalar));
    if (scalar) {
      OnGpuctlScalar(k, v);
      continue;
    }
    if (k != "activities") continue;
    od::array activities;
    if (field.value().get_array().get(activities) != simdjson::SUCCESS) continue;  // an object
    for (auto element : activities) {
      od::value a;
      GPUCTL_JSON_TRY(element.get(a));
      GPUCTL_JSON_TRY(ReadScalar(a, &v, &scalar));
      if (scalar && v.type == Scalar::Type::kString) {
        model_->info.activities.emplace_back(v.text);
      }
    }
  }
  return simdjson::SUCCESS;
}

simdjson::error_code TraceVisitor::OnDevices(od::array devices) {
  for (auto element : devices) {
    od::value value;
    GPUCTL_JSON_TRY(element.get(value));
    od::json_type type;
    GPUCTL_JSON_TRY(value.type().get(type));
    if (type != od::json_type::object) continue;
    ++model_->info.device_count;
    DeviceMemoryTotal device{-1, 0};
    od::object properties;
    GPUCTL_JSON_TRY(value.get_object().get(properties));
    for (auto member : properties) {
      GPUCTL_JSON_TRY(member.error());
      od::field& field = FieldOf(member);
      std::string_view k;
      GPUCTL_JSON_TRY(KeyOf(field, &k));
      if (k != "id" && k != "totalGlobalMem") continue;
      Scalar v;
      bool scalar = false;
      GPUCTL_JSON_TRY(ReadScalar(field.value(), &v, &scalar));
      if (scalar) OnDeviceScalar(k, v, &device);
    }
    if (device.device >= 0 && device.bytes > 0) model_->device_memory.push_back(device);
  }
  return simdjson::SUCCESS;
}

simdjson::error_code TraceVisitor::OnEvent(od::object event) {
  event_ = PendingEvent{};
  host_.BeginEvent();
  for (auto member : event) {
    GPUCTL_JSON_TRY(member.error());
    od::field& field = FieldOf(member);
    // A phase nothing here uses (flows, async, object events: half of a
    // trace with launch flows): the rest of the event is stepped over
    // unread, to its end, so that the element is whole.
    if (IgnoredPhase(event_.ph)) continue;
    std::string_view k;
    GPUCTL_JSON_TRY(KeyOf(field, &k));
    const EventKey key = ClassifyEventKey(k);
    if (key == EventKey::kOther) continue;
    if (key == EventKey::kArgs) {
      od::json_type type;
      GPUCTL_JSON_TRY(field.value().type().get(type));
      if (type == od::json_type::object) {
        GPUCTL_JSON_TRY(OnArgs(field.value().get_object().value_unsafe()));
      }
      continue;
    }
    if (OnPlainEventScalar(key, TokenText(field.value()))) continue;
    Scalar v;
    bool scalar = false;
    GPUCTL_JSON_TRY(ReadScalar(field.value(), &v, &scalar));
    if (scalar) OnEventScalar(key, v);
  }
  EndEvent();
  return simdjson::SUCCESS;
}

simdjson::error_code TraceVisitor::OnArgs(od::object args) {
  for (auto member : args) {
    GPUCTL_JSON_TRY(member.error());
    od::field& field = FieldOf(member);
    std::string_view k;
    GPUCTL_JSON_TRY(KeyOf(field, &k));
    arg_key_ = ClassifyArgKey(k);
    host_.OnArgKey(AsAbsl(k));
    if (arg_key_ == ArgKey::kOther && !host_.WantsArg()) continue;
    if (arg_key_ != ArgKey::kOther) {
      // Most are plain integers (ids, streams, sizes), read from their token.
      const std::string_view token = TokenText(field.value());
      if (std::optional<int64_t> i = PlainInteger(token); i.has_value()) {
        OnArgScalar(Scalar{Scalar::Type::kInt, *i, true, static_cast<double>(*i), {}, false});
        continue;
      }
    }
    Scalar v;
    bool scalar = false;
    GPUCTL_JSON_TRY(
        ReadScalar(field.value(), &v, &scalar,
                   arg_key_ == ArgKey::kBlocksPerSm || arg_key_ == ArgKey::kWarpsPerSm));
    if (!scalar) {
      GPUCTL_JSON_TRY(OnArgNested(field.value()));
      continue;
    }
    if (v.type == Scalar::Type::kString) host_.OnArgString(v.text, /*in_array=*/false);
    OnArgScalar(v);
  }
  return simdjson::SUCCESS;
}

// An array or object in args: its strings (a stack's frames) and, for grid
// and block, its numbers; anything nested deeper is skipped.
simdjson::error_code TraceVisitor::OnArgNested(od::value value) {
  const bool launch = arg_key_ == ArgKey::kGrid || arg_key_ == ArgKey::kBlock;
  auto on_element = [&](od::value element) -> simdjson::error_code {
    if (launch) {
      // Grid and block dimensions are plain integers, read from their token.
      if (std::optional<int64_t> i = PlainInteger(TokenText(element)); i.has_value()) {
        OnLaunchArg(Scalar{Scalar::Type::kInt, *i, true, static_cast<double>(*i), {}, false}, *i);
        return simdjson::SUCCESS;
      }
    }
    Scalar v;
    bool scalar = false;
    GPUCTL_JSON_TRY(ReadScalar(element, &v, &scalar));
    if (!scalar) return simdjson::SUCCESS;
    if (v.type == Scalar::Type::kString) host_.OnArgString(v.text, /*in_array=*/true);
    if (launch) OnLaunchArrayScalar(v);
    return simdjson::SUCCESS;
  };
  od::json_type type;
  GPUCTL_JSON_TRY(value.type().get(type));
  if (type == od::json_type::array) {
    od::array elements;
    GPUCTL_JSON_TRY(value.get_array().get(elements));
    for (auto element : elements) {
      od::value v;
      GPUCTL_JSON_TRY(element.get(v));
      GPUCTL_JSON_TRY(on_element(v));
    }
    return simdjson::SUCCESS;
  }
  od::object members;
  GPUCTL_JSON_TRY(value.get_object().get(members));
  for (auto member : members) {
    GPUCTL_JSON_TRY(member.error());
    od::field& field = FieldOf(member);
    GPUCTL_JSON_TRY(on_element(field.value()));
  }
  return simdjson::SUCCESS;
}

// An integer from a number or a numeric string (kineto writes some ids as
// strings).
std::optional<int64_t> AsInt(const Scalar& v) {
  if (v.type == Scalar::Type::kInt && v.fits) return v.i;
  if (v.type == Scalar::Type::kFloat) {
    const double d = NumberValue(v);
    if (std::isfinite(d) && std::fabs(d) < 9e18) return static_cast<int64_t>(d);
    return std::nullopt;
  }
  if (v.type == Scalar::Type::kString) {
    int64_t i = 0;
    if (absl::SimpleAtoi(v.text, &i)) return i;
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
  if (v.type == Scalar::Type::kFloat) return MicrosTextToNanos(v.text, kMaxMicros);
  return std::nullopt;
}

void TraceVisitor::OnEventScalar(EventKey key, const Scalar& v) {
  PendingEvent& e = event_;
  switch (key) {
    case EventKey::kPh:
      if (v.type == Scalar::Type::kString && v.text.size() == 1) e.ph = v.text[0];
      break;
    case EventKey::kCat:
      if (v.type == Scalar::Type::kString) {
        e.category = ClassifyCategory(std::string_view(v.text.data(), v.text.size()));
        host_.OnCategory(v.text);
      }
      break;
    case EventKey::kName:
      if (v.type == Scalar::Type::kString) e.name = v.text;
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
      } else if (key == EventKey::kTs) {
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

// The members every event has, straight from their token when it is in the
// form trace writers use: a string without escapes, a number without an
// exponent; false leaves anything else to ReadScalar, which validates it.
// Saves a type test and a second pass over each number's text.
bool TraceVisitor::OnPlainEventScalar(EventKey key, std::string_view token) {
  if (token.empty()) return false;
  switch (key) {
    case EventKey::kPh:
    case EventKey::kCat:
    case EventKey::kName: {
      if (token.size() < 2 || token.front() != '"' || token.back() != '"' ||
          std::memchr(token.data() + 1, '\\', token.size() - 2) != nullptr) {
        return false;
      }
      const Scalar v{
          Scalar::Type::kString, 0, true, 0, AsAbsl(token.substr(1, token.size() - 2)), false};
      OnEventScalar(key, v);
      return true;
    }
    case EventKey::kPid:
    case EventKey::kTid: {
      const std::optional<int64_t> n = PlainInteger(token);
      if (!n.has_value()) return false;
      (key == EventKey::kPid ? event_.pid : event_.tid) = *n;
      return true;
    }
    case EventKey::kTs:
    case EventKey::kDur: {
      bool integer = false;
      if (PlainNumberLength(token, &integer) != token.size()) return false;
      const std::optional<int64_t> ns = MicrosTextToNanos(AsAbsl(token), kMaxMicros);
      if (!ns.has_value()) {
        event_.bad_time = true;
      } else if (key == EventKey::kTs) {
        event_.has_ts = true;
        event_.ts_ns = *ns;
      } else {
        event_.has_dur = true;
        event_.dur_ns = *ns;
      }
      return true;
    }
    case EventKey::kArgs:
    case EventKey::kOther:
      break;
  }
  return false;
}

void TraceVisitor::OnArgScalar(const Scalar& v) {
  if (arg_key_ == ArgKey::kOther) return;
  const std::optional<int64_t> i =
      v.type == Scalar::Type::kInt && v.fits ? std::optional<int64_t>(v.i) : AsInt(v);
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
    case ArgKey::kTotalReserved:
      event_.total_reserved = *i >= 0 ? *i : -1;
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

void TraceVisitor::OnGpuctlScalar(std::string_view k, const Scalar& v) {
  TraceInfo& info = model_->info;
  const bool is_string = v.type == Scalar::Type::kString;
  int64_t n = 0;
  bool has_n = false;
  if (std::optional<int64_t> i = AsInt(v); !is_string && i.has_value()) {
    n = *i;
    has_n = true;
  }
  auto count = [&] { return has_n && n > 0 ? static_cast<uint64_t>(n) : uint64_t{0}; };
  if (k == "trace_id" && is_string) info.trace_id = std::string(v.text);
  if (k == "host" && is_string) info.host = std::string(v.text);
  if (k == "pid" && has_n) info.pid = n;
  if (k == "rank" && has_n) info.rank = n;
  if (k == "world_size" && has_n) info.world_size = n;
  if (k == "dropped_events") info.dropped_events = count();
  if (k == "cupti_dropped_records") info.cupti_dropped_records = count();
  if (k == "dropped_at_cap") info.dropped_at_cap = count();
  if (k == "host_only") info.host_only = v.type == Scalar::Type::kBool && v.i != 0;
  if (k == "host_only_reason" && is_string) info.host_only_reason = std::string(v.text);
  if (k == "cupti_failed") info.cupti_failed = v.type == Scalar::Type::kBool && v.i != 0;
  if (k == "cupti_message" && is_string) info.cupti_message = std::string(v.text);
  if (k == "window_start_ns" && has_n) {
    top_.gpuctl_window = true;
    top_.gpuctl_window_start_abs = n;
  }
  if (k == "window_end_ns" && has_n) {
    top_.gpuctl_window_end = true;
    top_.gpuctl_window_end_abs = n;
  }
}

void TraceVisitor::OnDeviceScalar(std::string_view k, const Scalar& v, DeviceMemoryTotal* device) {
  std::optional<int64_t> i = AsInt(v);
  if (!i.has_value() || *i < 0) return;
  if (k == "id" && *i <= INT32_MAX) device->device = static_cast<int32_t>(*i);
  if (k == "totalGlobalMem") device->bytes = static_cast<uint64_t>(*i);
}

void TraceVisitor::OnLaunchArg(const Scalar& v, int64_t i) {
  // Products beyond this are nonsense from the file; they saturate here.
  constexpr uint64_t kMaxProduct = uint64_t{1} << 48;
  PendingEvent& e = event_;
  KernelLaunch& l = e.launch;
  const double d = v.type == Scalar::Type::kString ? static_cast<double>(i) : NumberValue(v);
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

void TraceVisitor::OnLaunchArrayScalar(const Scalar& v) {
  if (std::optional<int64_t> i = AsInt(v); i.has_value()) OnLaunchArg(v, *i);
}

uint32_t TraceVisitor::InternLaunch(const PendingEvent& e) {
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

uint32_t TraceVisitor::Intern(absl::string_view name) {
  if (auto it = name_index_.find(name); it != name_index_.end()) return it->second;
  const auto index = static_cast<uint32_t>(model_->names.size());
  name_index_.emplace(name, index);
  model_->names.emplace_back(name);
  traits_.push_back(
      NameTraits{ClassifyApiCall(name), IsCommunicationKernel(name), ParseCopyName(name)});
  return index;
}

void TraceVisitor::EndEvent() {
  PendingEvent& e = event_;
  TraceInfo& info = model_->info;
  ++info.events;
  if (e.ph == 'C' || e.ph == 'i' || e.ph == 'I') EndMemoryEvent(e);
  if (host_.EndEvent(
          e.ph, e.name, e.has_ts && !e.bad_time, e.ts_ns, e.dur_ns, e.pid, e.tid,
          [this](absl::string_view s) { return Intern(s); }, &model_->host, &info.skipped_events)) {
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
      const NameTraits& traits = traits_[op.name];
      op.correlation = e.correlation;
      op.device = static_cast<int32_t>(e.has_device ? e.device : e.pid);
      op.stream = e.has_stream ? e.stream : e.tid;
      op.bytes = e.bytes;
      op.graph = e.graph;
      if (e.category == Category::kKernel && e.has_launch) op.launch = InternLaunch(e);
      if (e.category == Category::kKernel) {
        op.kind = traits.communication ? GpuOpKind::kCommKernel : GpuOpKind::kKernel;
      } else {
        op.kind = e.category == Category::kMemcpy ? GpuOpKind::kMemcpy : GpuOpKind::kMemset;
        op.direction = traits.copy.direction;
        op.pageable = traits.copy.pageable;
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
    case Category::kDriver: {
      const uint32_t name = Intern(e.name);
      model_->api_calls.push_back(
          ApiCall{start, end, e.correlation, e.pid, e.tid, name, traits_[name].api});
      break;
    }
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
void TraceVisitor::EndMemoryEvent(const PendingEvent& e) {
  MemorySample sample;
  if (e.ph == 'C' && e.category == Category::kGpuMemory && e.has_signed_bytes) {
    sample = MemorySample{e.ts_ns, e.signed_bytes, static_cast<int32_t>(e.pid), false, -1};
  } else if (e.ph != 'C' && e.category == Category::kCpuInstant && e.name == "[memory]" &&
             e.device_type == 1 && e.has_total_allocated && e.has_memory_device) {
    sample = MemorySample{e.ts_ns, e.total_allocated, static_cast<int32_t>(e.memory_device), true,
                          e.total_reserved};
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

void TraceVisitor::Finish() {
  TraceInfo& info = model_->info;
  // gpuctl's files carry the capture window; a kineto file tagged by gpuctld
  // has a `gpuctl` member without one.
  if (info.format == TraceFormat::kGpuctl && !top_.gpuctl_window) {
    info.format = TraceFormat::kKineto;
  }
  info.has_gpuctl_meta = info.format == TraceFormat::kGpuctl;
  if (top_.gpuctl_window && top_.gpuctl_window_end &&
      top_.gpuctl_window_end_abs >= top_.gpuctl_window_start_abs) {
    info.has_window = true;
    info.window_start_ns = top_.gpuctl_window_start_abs - info.base_time_ns;
    info.window_end_ns = top_.gpuctl_window_end_abs - info.base_time_ns;
  } else if (has_span_) {
    info.has_window = true;
    info.window_start_ns = span_start_;
    info.window_end_ns = span_end_;
  }
  info.has_activities = info.has_gpuctl_meta;
  if (info.rank < 0) info.rank = top_.distributed_rank;
  if (info.world_size < 0) info.world_size = top_.distributed_world;
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
  return ReadTraceInPieces(std::move(input), name, kTracePieceBytes);
}

absl::StatusOr<TraceModel> ReadTraceInPieces(TraceInput input, const std::string& name,
                                             size_t piece_bytes) {
  TraceModel model;
  model.info.path = name;
  TraceVisitor visitor(&model);
  absl::Status parsed = StreamTraceJson(&input, &visitor, piece_bytes);
  // A decompression error ends the document early: it is the cause.
  if (!input.status().ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", input.status().message()));
  }
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(name, ": ", parsed.message()));
  visitor.Finish();
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
