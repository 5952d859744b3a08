#include "client_lib/src/process_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>

#ifndef GPUCTL_VERSION
#error "GPUCTL_VERSION must be defined by the build"
#endif

namespace gpuctl::client {
namespace {

// Keeps Hello well below one datagram whatever the command line.
constexpr size_t kMaxCmdlineBytes = 16 * 1024;
constexpr size_t kMaxIdentityField = 256;

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

std::string Truncated(std::string s) {
  if (s.size() > kMaxIdentityField) s.resize(kMaxIdentityField);
  return s;
}

}  // namespace

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
      hello.job_id = Truncated(std::move(*value));
      break;
    }
  }
  hello.rank = ParseRankValue(env("RANK"));
  hello.local_rank = ParseRankValue(env("LOCAL_RANK"));
  hello.world_size = ParseRankValue(env("WORLD_SIZE"));
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) hello.hostname = host;
  hello.cmdline =
      SplitCmdline(ReadSmallFile(proc_root + "/self/cmdline", kMaxCmdlineBytes), kMaxCmdlineBytes);
  hello.capabilities = wire::kCapabilityMemfd | wire::kCapabilityHostRanges;
#ifdef GPUCTL_HAVE_CUPTI
  hello.capabilities |= wire::kCapabilityCupti;
#endif
  return hello;
}

}  // namespace gpuctl::client
