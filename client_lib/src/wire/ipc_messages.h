// Plain C++ mirrors of proto/gpuctl/v1/ipc.proto, with the library's own
// protobuf wire codec. The client library must not link libprotobuf (the
// host process may carry its own, different copy); this codec is the only
// way it speaks the IPC schema. Field numbers below must match ipc.proto.
#ifndef GPUCTL_CLIENT_LIB_SRC_WIRE_IPC_MESSAGES_H_
#define GPUCTL_CLIENT_LIB_SRC_WIRE_IPC_MESSAGES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gpuctl::wire {

inline constexpr uint32_t kProtocolMajor = 1;
inline constexpr uint32_t kProtocolMinor = 2;
// Largest datagram either side sends or accepts.
inline constexpr size_t kMaxIpcMessageBytes = size_t{64} * 1024;

// gpuctl.v1.CaptureStatus
enum class CaptureStatus : int32_t {
  kUnspecified = 0,
  kOk = 1,
  kBusy = 2,
  kUnavailable = 3,
  kFailed = 4,
  kTimedOut = 5,
  kExited = 6,
  kLost = 7,
  kRejected = 8,
};

// gpuctl.v1.ipc.PayloadTransport
enum class PayloadTransport : int32_t { kNone = 0, kMemfd = 1, kInline = 2 };

// gpuctl.v1.ipc.Capability bits
inline constexpr uint64_t kCapabilityMemfd = 1;
inline constexpr uint64_t kCapabilityHostRanges = 2;
inline constexpr uint64_t kCapabilityCupti = 4;
inline constexpr uint64_t kCapabilityStepCounter = 8;
inline constexpr uint64_t kCapabilityStepWindows = 16;

struct Hello {
  uint32_t protocol_major = 0;
  uint32_t protocol_minor = 0;
  std::string library_version;
  int32_t pid = 0;
  int32_t ppid = 0;
  std::string job_id;
  int32_t rank = 0;
  int32_t local_rank = 0;
  int32_t world_size = 0;
  std::string hostname;
  std::vector<std::string> cmdline;
  uint64_t capabilities = 0;
  std::vector<std::string> labels;  // "key=value" (minor 1)
  bool step_counter = false;        // the datagram carries the step page (minor 1)
  bool operator==(const Hello&) const = default;
};

struct HelloAck {
  uint32_t protocol_major = 0;
  uint32_t protocol_minor = 0;
  std::string daemon_version;
  uint64_t max_payload_bytes = 0;
  bool operator==(const HelloAck&) const = default;
};

// gpuctl.v1.ipc.RejectReason
enum class RejectReason : int32_t {
  kUnspecified = 0,
  kPermissionDenied = 1,
  kProtocolVersion = 2,
  kInvalidHello = 3,
  kRateLimited = 4,  // registration churn over the daemon's Hello rate limit
};

struct HelloRejected {  // minor 2
  // Raw enum value (RejectReason), kept as sent.
  int32_t reason = 0;
  std::string message;
  uint32_t protocol_major = 0;
  uint32_t protocol_minor = 0;
  bool operator==(const HelloRejected&) const = default;
};

struct StartCapture {
  std::string trace_id;
  int64_t start_time_unix_ns = 0;
  int64_t duration_ns = 0;
  uint64_t max_buffer_bytes = 0;
  std::vector<std::string> activities;
  uint64_t activity_buffer_bytes = 0;
  int64_t max_start_skew_ns = 0;  // minor 1
  uint64_t start_step = 0;        // minor 1
  uint32_t iterations = 0;        // minor 1
  bool operator==(const StartCapture&) const = default;
};

struct CancelCapture {
  std::string trace_id;
  std::string reason;
  bool operator==(const CancelCapture&) const = default;
};

struct CaptureStarted {
  std::string trace_id;
  int64_t opened_at_unix_ns = 0;
  uint64_t first_step = 0;
  bool late_start = false;
  bool operator==(const CaptureStarted&) const = default;
};

struct CaptureResult {
  std::string trace_id;
  // Raw enum value: unknown values from a newer peer are kept, not lost.
  int32_t status = 0;
  std::string message;
  int32_t transport = 0;
  uint64_t payload_size = 0;
  uint64_t event_count = 0;
  uint64_t dropped_events = 0;
  int64_t window_start_unix_ns = 0;
  int64_t window_end_unix_ns = 0;
  bool host_only = false;
  uint64_t cupti_dropped_records = 0;
  bool late_start = false;  // minor 1
  uint64_t first_step = 0;  // minor 1
  uint32_t steps = 0;       // minor 1
  bool operator==(const CaptureResult&) const = default;
};

struct PayloadChunk {
  std::string trace_id;
  uint64_t offset = 0;
  std::string data;
  bool operator==(const PayloadChunk&) const = default;
};

struct Goodbye {
  std::string reason;
  bool operator==(const Goodbye&) const = default;
};

// An empty oneof decodes as std::monostate.
using ClientMessage =
    std::variant<std::monostate, Hello, CaptureStarted, CaptureResult, PayloadChunk, Goodbye>;
using DaemonMessage =
    std::variant<std::monostate, HelloAck, StartCapture, CancelCapture, HelloRejected>;

// Appends the encoding of `message` to `out`.
void Encode(const ClientMessage& message, std::string* out);
void Encode(const DaemonMessage& message, std::string* out);

// Decodes one whole message. Returns false on malformed input (truncated
// varints or lengths, bad wire types, lengths past the end, invalid nesting,
// a string field that is not valid UTF-8); unknown fields are skipped; as in
// protobuf, a oneof member that appears again is merged into the one already
// decoded and a different member replaces it. On false, *out is
// std::monostate. Never reads outside `bytes`.
bool Decode(std::string_view bytes, ClientMessage* out);
bool Decode(std::string_view bytes, DaemonMessage* out);

}  // namespace gpuctl::wire

#endif  // GPUCTL_CLIENT_LIB_SRC_WIRE_IPC_MESSAGES_H_
