#ifndef GPUCTL_DAEMON_KINETO_KINETO_PROTOCOL_H_
#define GPUCTL_DAEMON_KINETO_KINETO_PROTOCOL_H_

// libkineto's daemon protocol (the datagrams dynolog serves on
// "\0dynolog\0"), decoded without trusting a byte of it. Every datagram is
// Metadata{size_t size; char type[32]} followed by `size` payload bytes, in
// the sender's native byte order (the daemon's: both run on one host).

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace gpuctl::daemon::kineto {

inline constexpr size_t kTypeBytes = 32;
inline constexpr size_t kMetadataBytes = sizeof(uint64_t) + kTypeBytes;  // 40
// LibkinetoRequest{int32 type; int32 n; int64 jobid} before its pids.
inline constexpr size_t kRequestHeaderBytes = 16;
// LibkinetoContext{int32 gpu; int32 pid; int64 jobid}.
inline constexpr size_t kContextBytes = 16;
// libkineto sends its pid and its ancestors' (about ten); more is refused.
inline constexpr int32_t kMaxRequestPids = 32;
// The largest datagram the daemon accepts; a receive buffer one byte larger
// tells a longer one apart.
inline constexpr size_t kMaxDatagramBytes =
    kMetadataBytes + kRequestHeaderBytes + sizeof(int32_t) * kMaxRequestPids;

inline constexpr char kRequestType[] = "req";
inline constexpr char kContextType[] = "ctxt";

// LibkinetoRequest.type bits.
inline constexpr int32_t kConfigTypeEvents = 1;
// Set while the process's activity profiler can take a trace: the
// idle/busy flag of every heartbeat.
inline constexpr int32_t kConfigTypeActivities = 2;

// A `req`: the poll for an on-demand config, sent every
// ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS (5 s by default).
struct KinetoRequest {
  int32_t type = 0;
  int64_t job_id = 0;  // SLURM_JOB_ID, else 0
  // The sender's pid first, then its ancestors', in its own pid namespace.
  std::vector<int32_t> pids;

  bool activities_idle() const { return (type & kConfigTypeActivities) != 0; }
};

// A `ctxt`: the registration older libkineto versions send once.
struct KinetoContext {
  int32_t gpu = 0;
  int32_t pid = 0;
  int64_t job_id = 0;
};

using KinetoMessage = std::variant<KinetoRequest, KinetoContext>;

// Decodes one datagram. INVALID_ARGUMENT naming what is wrong for a short
// or long datagram, a Metadata.size other than what follows it, a type
// that is not NUL-terminated or not `req`/`ctxt`, a request with no pid,
// a negative count or more than kMaxRequestPids, or a non-positive pid.
// Fields are copied out with memcpy; never crashes on any input.
absl::StatusOr<KinetoMessage> DecodeDatagram(absl::Span<const uint8_t> datagram);

// The daemon's answer to a `req`: type `req` and `config` (empty: nothing
// to do).
std::string EncodeRequestReply(absl::string_view config);
// The answer to a `ctxt`: type `ctxt` and an int32 (the processes known).
std::string EncodeContextReply(int32_t count);
// A datagram as libkineto builds one (tests, benchmarks).
std::string EncodeRequest(const KinetoRequest& request);
std::string EncodeContext(const KinetoContext& context);
// A datagram of `type` and `payload`, for tests of malformed input.
std::string EncodeRaw(absl::string_view type, absl::string_view payload);

// What gpuctld asks a kineto process to capture. Every value is checked by
// BuildConfigText; none is copied from a request's free text.
struct KinetoCaptureConfig {
  // Where the process writes its trace: under /tmp/ (kineto replaces a path
  // outside KINETO_ONDEMAND_TRACE_DIR with its default), a file name of
  // [A-Za-z0-9._-] ending in .json.
  std::string log_file;
  // gpuctl's trace id (lowercase hex and dashes), echoed in the file.
  std::string trace_id;
  // Time window: the start instant and the length.
  absl::Time start = absl::UnixEpoch();
  absl::Duration duration = absl::ZeroDuration();
  // Iteration window (iterations > 0): kineto counts optimizer.step()
  // calls; the window starts at the next multiple of start_roundup. With a
  // duration too, the time window is what kineto falls back to when it
  // has counted no iteration yet (it then ignores the iteration keys).
  uint32_t iterations = 0;
  uint32_t start_roundup = 1;
  // Whole seconds of profiler warm-up before the start.
  int32_t warmup_secs = 1;
  bool with_stack = false;
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_flops = false;
  bool with_modules = false;
};

// The KEY=VALUE lines for `config`, from an allow-list of keys:
// ACTIVITIES_LOG_FILE, REQUEST_TRACE_ID, ACTIVITIES_WARMUP_PERIOD_SECS,
// ACTIVITIES_ITERATIONS and PROFILE_START_ITERATION_ROUNDUP (an iteration
// window), ACTIVITIES_DURATION_MSECS and PROFILE_START_TIME (ms since the
// epoch; a time window, or an iteration window's fallback), and the
// PROFILE_* flags that are set. INVALID_ARGUMENT naming the field for a
// value outside its rules.
absl::StatusOr<std::string> BuildConfigText(const KinetoCaptureConfig& config);

}  // namespace gpuctl::daemon::kineto

#endif  // GPUCTL_DAEMON_KINETO_KINETO_PROTOCOL_H_
