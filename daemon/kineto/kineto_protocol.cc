#include "daemon/kineto/kineto_protocol.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gpuctl::daemon::kineto {
namespace {

// The longest log file path and trace id BuildConfigText accepts.
constexpr size_t kMaxLogFileBytes = 200;
constexpr size_t kMaxTraceIdBytes = 64;
constexpr uint32_t kMaxIterations = 1000000;
constexpr int32_t kMaxWarmupSecs = 600;
constexpr absl::Duration kMaxDuration = absl::Hours(1);

template <typename T>
T Load(absl::Span<const uint8_t> bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <typename T>
void Store(std::string* out, T value) {
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  out->append(raw, sizeof(T));
}

// The type name: the bytes before the first NUL of the 32-byte field.
absl::StatusOr<absl::string_view> TypeName(absl::Span<const uint8_t> datagram) {
  const char* type = reinterpret_cast<const char*>(datagram.data()) + sizeof(uint64_t);  // NOLINT
  const void* nul = std::memchr(type, '\0', kTypeBytes);
  if (nul == nullptr) {
    return absl::InvalidArgumentError("kineto datagram type is not NUL-terminated");
  }
  return absl::string_view(type, static_cast<const char*>(nul) - type);
}

absl::StatusOr<KinetoMessage> DecodeRequest(absl::Span<const uint8_t> payload) {
  if (payload.size() < kRequestHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("kineto request of ", payload.size(),
                                                   " bytes, fewer than its header's ",
                                                   kRequestHeaderBytes));
  }
  KinetoRequest request;
  request.type = Load<int32_t>(payload, 0);
  const int32_t n = Load<int32_t>(payload, 4);
  request.job_id = Load<int64_t>(payload, 8);
  if (n < 1 || n > kMaxRequestPids) {
    return absl::InvalidArgumentError(
        absl::StrCat("kineto request names ", n, " pids, not 1 to ", kMaxRequestPids));
  }
  const size_t expected = kRequestHeaderBytes + sizeof(int32_t) * static_cast<size_t>(n);
  if (payload.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kineto request of ", payload.size(), " bytes for ", n, " pids (", expected, " expected)"));
  }
  request.pids.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pid = Load<int32_t>(payload, kRequestHeaderBytes + sizeof(int32_t) * i);
    if (pid <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kineto request pid ", i, " is ", pid, ", not positive"));
    }
    request.pids.push_back(pid);
  }
  return request;
}

absl::StatusOr<KinetoMessage> DecodeContext(absl::Span<const uint8_t> payload) {
  if (payload.size() != kContextBytes) {
    return absl::InvalidArgumentError(absl::StrCat("kineto context of ", payload.size(), " bytes (",
                                                   kContextBytes, " expected)"));
  }
  KinetoContext context;
  context.gpu = Load<int32_t>(payload, 0);
  context.pid = Load<int32_t>(payload, 4);
  context.job_id = Load<int64_t>(payload, 8);
  if (context.pid <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kineto context pid is ", context.pid, ", not positive"));
  }
  return context;
}

bool IsFileNameChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-'; }

absl::Status CheckLogFile(absl::string_view path) {
  constexpr absl::string_view kDir = "/tmp/";
  constexpr absl::string_view kSuffix = ".json";
  absl::string_view name = path;
  bool ok = path.size() <= kMaxLogFileBytes && absl::ConsumePrefix(&name, kDir) &&
            name.size() > kSuffix.size() && absl::EndsWith(name, kSuffix) &&
            name.find("..") == absl::string_view::npos && name.front() != '.';
  for (char c : name) ok = ok && IsFileNameChar(c);
  if (!ok) {
    return absl::InvalidArgumentError(
        "kineto log file must be /tmp/<name>.json with a name of [A-Za-z0-9._-]");
  }
  return absl::OkStatus();
}

absl::Status CheckTraceId(absl::string_view id) {
  bool ok = !id.empty() && id.size() <= kMaxTraceIdBytes;
  for (char c : id) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-');
  if (!ok) return absl::InvalidArgumentError("kineto trace id must be lowercase hex and dashes");
  return absl::OkStatus();
}

absl::Status CheckWindow(const KinetoCaptureConfig& config) {
  if (config.warmup_secs < 0 || config.warmup_secs > kMaxWarmupSecs) {
    return absl::InvalidArgumentError(
        absl::StrCat("kineto warm-up of ", config.warmup_secs, "s is not 0 to ", kMaxWarmupSecs));
  }
  if (config.iterations > 0) {
    if (config.iterations > kMaxIterations || config.start_roundup == 0 ||
        config.start_roundup > kMaxIterations) {
      return absl::InvalidArgumentError(absl::StrCat("kineto iterations ", config.iterations,
                                                     " and roundup ", config.start_roundup,
                                                     " must be 1 to ", kMaxIterations));
    }
    // The time window is optional here: kineto's fallback.
    if (config.duration == absl::ZeroDuration()) return absl::OkStatus();
  }
  if (config.duration < absl::Milliseconds(1) || config.duration > kMaxDuration) {
    return absl::InvalidArgumentError(
        absl::StrCat("kineto window of ", absl::FormatDuration(config.duration), " is not 1ms to ",
                     absl::FormatDuration(kMaxDuration)));
  }
  if (config.start <= absl::UnixEpoch()) {
    return absl::InvalidArgumentError("kineto start instant is not after the epoch");
  }
  return absl::OkStatus();
}

void AppendFlag(std::string* text, absl::string_view key, bool set) {
  if (set) absl::StrAppend(text, key, "=true\n");
}

}  // namespace

absl::StatusOr<KinetoMessage> DecodeDatagram(absl::Span<const uint8_t> datagram) {
  if (datagram.size() < kMetadataBytes) {
    return absl::InvalidArgumentError(absl::StrCat("kineto datagram of ", datagram.size(),
                                                   " bytes, shorter than its ", kMetadataBytes,
                                                   "-byte header"));
  }
  if (datagram.size() > kMaxDatagramBytes) {
    return absl::InvalidArgumentError(absl::StrCat("kineto datagram of ", datagram.size(),
                                                   " bytes, more than ", kMaxDatagramBytes));
  }
  const uint64_t size = Load<uint64_t>(datagram, 0);
  if (size != datagram.size() - kMetadataBytes) {
    return absl::InvalidArgumentError(absl::StrCat("kineto datagram announces ", size,
                                                   " payload bytes but carries ",
                                                   datagram.size() - kMetadataBytes));
  }
  absl::StatusOr<absl::string_view> type = TypeName(datagram);
  if (!type.ok()) return type.status();
  absl::Span<const uint8_t> payload = datagram.subspan(kMetadataBytes);
  if (*type == kRequestType) return DecodeRequest(payload);
  if (*type == kContextType) return DecodeContext(payload);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown kineto datagram type \"", absl::CHexEscape(*type), "\""));
}

std::string EncodeRaw(absl::string_view type, absl::string_view payload) {
  std::string out;
  out.reserve(kMetadataBytes + payload.size());
  Store<uint64_t>(&out, payload.size());
  char name[kTypeBytes] = {};
  std::memcpy(name, type.data(), std::min(type.size(), kTypeBytes));
  out.append(name, kTypeBytes);
  out.append(payload.data(), payload.size());
  return out;
}

std::string EncodeRequestReply(absl::string_view config) { return EncodeRaw(kRequestType, config); }

std::string EncodeContextReply(int32_t count) {
  std::string payload;
  Store<int32_t>(&payload, count);
  return EncodeRaw(kContextType, payload);
}

std::string EncodeRequest(const KinetoRequest& request) {
  std::string payload;
  Store<int32_t>(&payload, request.type);
  Store<int32_t>(&payload, static_cast<int32_t>(request.pids.size()));
  Store<int64_t>(&payload, request.job_id);
  for (int32_t pid : request.pids) Store<int32_t>(&payload, pid);
  return EncodeRaw(kRequestType, payload);
}

std::string EncodeContext(const KinetoContext& context) {
  std::string payload;
  Store<int32_t>(&payload, context.gpu);
  Store<int32_t>(&payload, context.pid);
  Store<int64_t>(&payload, context.job_id);
  return EncodeRaw(kContextType, payload);
}

absl::StatusOr<std::string> BuildConfigText(const KinetoCaptureConfig& config) {
  if (absl::Status st = CheckLogFile(config.log_file); !st.ok()) return st;
  if (absl::Status st = CheckTraceId(config.trace_id); !st.ok()) return st;
  if (absl::Status st = CheckWindow(config); !st.ok()) return st;
  std::string text;
  absl::StrAppend(&text, "ACTIVITIES_LOG_FILE=", config.log_file, "\n");
  absl::StrAppend(&text, "REQUEST_TRACE_ID=", config.trace_id, "\n");
  absl::StrAppend(&text, "ACTIVITIES_WARMUP_PERIOD_SECS=", config.warmup_secs, "\n");
  if (config.iterations > 0) {
    absl::StrAppend(&text, "ACTIVITIES_ITERATIONS=", config.iterations, "\n");
    absl::StrAppend(&text, "PROFILE_START_ITERATION_ROUNDUP=", config.start_roundup, "\n");
  }
  if (config.duration > absl::ZeroDuration()) {
    absl::StrAppend(&text, "ACTIVITIES_DURATION_MSECS=", absl::ToInt64Milliseconds(config.duration),
                    "\n");
    absl::StrAppend(&text, "PROFILE_START_TIME=", absl::ToUnixMillis(config.start), "\n");
  }
  AppendFlag(&text, "PROFILE_WITH_STACK", config.with_stack);
  AppendFlag(&text, "PROFILE_REPORT_INPUT_SHAPES", config.record_shapes);
  AppendFlag(&text, "PROFILE_PROFILE_MEMORY", config.profile_memory);
  AppendFlag(&text, "PROFILE_WITH_FLOPS", config.with_flops);
  AppendFlag(&text, "PROFILE_WITH_MODULES", config.with_modules);
  return text;
}

}  // namespace gpuctl::daemon::kineto
