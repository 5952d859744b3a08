#include "daemon/metrics/process_collector.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/metrics/families.h"

namespace gpuctl::daemon::metrics {
namespace {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "VmRSS:\t  1234 kB" -> 1234 * 1024; `scale` 1 for plain counts.
bool StatusField(absl::string_view status, absl::string_view key, double scale, double* out) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, ":")) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, " kB");
    uint64_t value = 0;
    if (!absl::SimpleAtoi(line, &value)) return false;
    *out = static_cast<double>(value) * scale;
    return true;
  }
  return false;
}

// The fields of /proc/PID/stat after the command name, which may hold
// spaces and parentheses: field 3 (state) is fields[0].
absl::StatusOr<std::vector<absl::string_view>> StatFields(absl::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos) return absl::DataLossError("stat has no command name");
  std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  // starttime is field 22.
  if (fields.size() < 20) return absl::DataLossError("stat has too few fields");
  return fields;
}

}  // namespace

absl::StatusOr<ProcessStats> ReadProcessStats(const std::string& proc_root,
                                              int64_t ticks_per_second) {
  if (ticks_per_second <= 0) return absl::InvalidArgumentError("no clock tick rate");
  absl::StatusOr<std::string> stat = ReadSmallFile(proc_root + "/self/stat");
  if (!stat.ok()) return stat.status();
  absl::StatusOr<std::vector<absl::string_view>> fields = StatFields(*stat);
  if (!fields.ok()) return fields.status();
  // Fields 14 (utime), 15 (stime), 22 (starttime) at 11, 12, 19.
  uint64_t utime = 0, stime = 0, start_ticks = 0;
  if (!absl::SimpleAtoi((*fields)[11], &utime) || !absl::SimpleAtoi((*fields)[12], &stime) ||
      !absl::SimpleAtoi((*fields)[19], &start_ticks)) {
    return absl::DataLossError("stat has a malformed time field");
  }
  ProcessStats out;
  const double ticks = static_cast<double>(ticks_per_second);
  out.cpu_seconds = static_cast<double>(utime + stime) / ticks;
  absl::StatusOr<std::string> status = ReadSmallFile(proc_root + "/self/status");
  if (!status.ok()) return status.status();
  if (!StatusField(*status, "VmRSS", 1024, &out.resident_bytes) ||
      !StatusField(*status, "VmSize", 1024, &out.virtual_bytes) ||
      !StatusField(*status, "Threads", 1, &out.threads)) {
    return absl::DataLossError("status lacks VmRSS, VmSize or Threads");
  }
  double boot_time = 0;
  absl::StatusOr<std::string> system = ReadSmallFile(proc_root + "/stat");
  if (system.ok()) {
    for (absl::string_view line : absl::StrSplit(*system, '\n')) {
      uint64_t btime = 0;
      if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtoi(line, &btime)) {
        boot_time = static_cast<double>(btime);
      }
    }
  }
  if (boot_time > 0) out.start_time_seconds = boot_time + static_cast<double>(start_ticks) / ticks;
  std::error_code error;
  for (std::filesystem::directory_iterator it(proc_root + "/self/fd", error), end;
       !error && it != end; it.increment(error)) {
    ++out.open_fds;
  }
  return out;
}

ProcessCollector::ProcessCollector(std::string proc_root)
    : proc_root_(std::move(proc_root)), ticks_per_second_(sysconf(_SC_CLK_TCK)) {}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  absl::StatusOr<ProcessStats> stats = ReadProcessStats(proc_root_, ticks_per_second_);
  if (!stats.ok()) return {};
  std::vector<prometheus::MetricFamily> out;
  out.push_back(CounterFamily("process_cpu_seconds_total",
                              "User and system CPU time spent by gpuctld, in seconds",
                              stats->cpu_seconds));
  out.push_back(GaugeFamily("process_resident_memory_bytes", "gpuctld's resident memory size",
                            stats->resident_bytes));
  out.push_back(GaugeFamily("process_virtual_memory_bytes", "gpuctld's virtual memory size",
                            stats->virtual_bytes));
  out.push_back(GaugeFamily("process_threads", "gpuctld's threads", stats->threads));
  out.push_back(
      GaugeFamily("process_open_fds", "gpuctld's open file descriptors", stats->open_fds));
  if (stats->start_time_seconds > 0) {
    out.push_back(GaugeFamily("process_start_time_seconds",
                              "When gpuctld started, in seconds since the Unix epoch",
                              stats->start_time_seconds));
  }
  return out;
}

}  // namespace gpuctl::daemon::metrics
