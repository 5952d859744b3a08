#include "client_lib/src/process_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>

#include "client_lib/src/labels.h"
#include "client_lib/src/wire/wire_format.h"

#ifndef GPUCTL_VERSION
#error "GPUCTL_VERSION must be defined by the build"
#endif

namespace gpuctl::client {
namespace {

// Keeps Hello well below one datagram whatever the command line.
constexpr size_t kMaxCmdlineBytes = 16 * 1024;
constexpr size_t kMaxIdentityField = 256;
// Room left in the datagram for anything a newer Hello may add.
constexpr size_t kMaxHelloBytes = wire::kMaxIpcMessageBytes - 1024;

std::string Truncated(std::string s) {
  if (s.size() > kMaxIdentityField) s.resize(kMaxIdentityField);
  return s;
}

size_t EncodedSize(const wire::Hello& hello) {
  std::string bytes;
  wire::Encode(wire::ClientMessage(hello), &bytes);
  return bytes.size();
}

}  // namespace

std::string ReadSmallFile(const std::string& path, size_t limit) {
  std::string out;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  while (out.size() < limit) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (out.size() > limit) out.resize(limit);
  return out;
}

EnvLookup ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

int32_t ParseRankValue(const std::optional<std::string>& value) {
  if (!value.has_value() || value->empty() || value->size() > 10) return -1;
  int64_t parsed = 0;
  for (char c : *value) {
    if (c < '0' || c > '9') return -1;
    parsed = parsed * 10 + (c - '0');
  }
  return parsed > INT32_MAX ? -1 : static_cast<int32_t>(parsed);
}

int32_t FirstRankValue(const EnvLookup& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const int32_t value = ParseRankValue(env(name));
    if (value >= 0) return value;
  }
  return -1;
}

std::vector<std::string> SplitCmdline(std::string_view raw, size_t max_total_bytes) {
  std::vector<std::string> args;
  size_t total = 0;
  while (!raw.empty() && total < max_total_bytes) {
    const size_t end = raw.find('\0');
    std::string_view arg = raw.substr(0, end);
    arg = arg.substr(0, max_total_bytes - total);
    args.emplace_back(arg);
    total += arg.size();
    if (end == std::string_view::npos) break;
    raw.remove_prefix(end + 1);
  }
  return args;
}

wire::Hello BuildHello(const EnvLookup& env, const std::string& proc_root) {
  wire::Hello hello;
  hello.protocol_major = wire::kProtocolMajor;
  hello.protocol_minor = wire::kProtocolMinor;
  hello.library_version = GPUCTL_VERSION;
  hello.pid = static_cast<int32_t>(getpid());
  hello.ppid = static_cast<int32_t>(getppid());
  for (const char* name : {"GPUCTL_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    std::optional<std::string> value = env(name);
    if (value.has_value() && !value->empty()) {
      hello.job_id = wire::ToValidUtf8(Truncated(std::move(*value)));
      break;
    }
  }
  hello.rank = FirstRankValue(env, {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  hello.local_rank =
      FirstRankValue(env, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"});
  hello.world_size =
      FirstRankValue(env, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) hello.hostname = wire::ToValidUtf8(host);
  // protobuf refuses a message whose string field is not UTF-8.
  hello.cmdline =
      SplitCmdline(ReadSmallFile(proc_root + "/self/cmdline", kMaxCmdlineBytes), kMaxCmdlineBytes);
  for (std::string& arg : hello.cmdline) arg = wire::ToValidUtf8(arg);
  hello.labels = CollectLabels(env);
  hello.capabilities =
      wire::kCapabilityMemfd | wire::kCapabilityHostRanges | wire::kCapabilityStepWindows;
#ifdef GPUCTL_HAVE_CUPTI
  hello.capabilities |= wire::kCapabilityCupti;
#endif
  // Replacement characters can grow the command line: the Hello must fit
  // one datagram, so trailing arguments go first.
  while (!hello.cmdline.empty() && EncodedSize(hello) > kMaxHelloBytes) hello.cmdline.pop_back();
  return hello;
}

}  // namespace gpuctl::client
