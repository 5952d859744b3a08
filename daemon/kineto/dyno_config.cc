#include "daemon/kineto/dyno_config.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/common/excerpt.h"
#include "daemon/core/proto_time.h"

namespace gpuctl::daemon {
namespace {

// The longest window a dyno request may ask for; the core applies its own,
// usually smaller, maximum.
constexpr int64_t kMaxDurationMs = int64_t{24} * 3600 * 1000;
// PROFILE_START_TIME after this (year 2286) is not milliseconds.
constexpr int64_t kMaxStartTimeMs = int64_t{9999999999999};

absl::StatusOr<int64_t> ParseInt(absl::string_view value, int64_t min, int64_t max) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Excerpt(value), "\" is not a whole number"));
  }
  if (v < min || v > max) {
    return absl::InvalidArgumentError(absl::StrCat(v, " is outside [", min, ", ", max, "]"));
  }
  return v;
}

absl::StatusOr<bool> ParseBool(absl::string_view value) {
  std::string lower = absl::AsciiStrToLower(value);
  if (lower == "true" || lower == "1") return true;
  if (lower == "false" || lower == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat("\"", Excerpt(value), "\" is not true or false"));
}

// Applies one KEY=VALUE; false when gpuctld does not take the key.
absl::StatusOr<bool> ApplyKey(absl::string_view key, absl::string_view value, DynoTraceConfig* c) {
  if (key == "ACTIVITIES_DURATION_MSECS") {
    absl::StatusOr<int64_t> ms = ParseInt(value, 1, kMaxDurationMs);
    if (!ms.ok()) return ms.status();
    c->duration = absl::Milliseconds(*ms);
  } else if (key == "PROFILE_START_TIME") {
    absl::StatusOr<int64_t> ms = ParseInt(value, 0, kMaxStartTimeMs);
    if (!ms.ok()) return ms.status();
    c->start_time = *ms == 0 ? std::nullopt : std::optional(absl::FromUnixMillis(*ms));
  } else if (key == "ACTIVITIES_ITERATIONS") {
    // kineto reads 0 and below as "no iteration window".
    absl::StatusOr<int64_t> n =
        ParseInt(value, std::numeric_limits<int32_t>::min(), kDynoMaxIterations);
    if (!n.ok()) return n.status();
    c->iterations = static_cast<uint32_t>(std::max<int64_t>(*n, 0));
  } else if (key == "PROFILE_START_ITERATION") {
    absl::StatusOr<int64_t> n = ParseInt(value, 0, std::numeric_limits<int64_t>::max());
    if (!n.ok()) return n.status();
    c->start_iteration = *n == 0 ? std::nullopt : std::optional(static_cast<uint64_t>(*n));
  } else if (key == "PROFILE_START_ITERATION_ROUNDUP") {
    absl::StatusOr<int64_t> n = ParseInt(value, 0, kDynoMaxIterations);
    if (!n.ok()) return n.status();
    c->iteration_roundup = static_cast<uint32_t>(*n);
  } else {
    using Setter = void (v1::KinetoTraceOptions::*)(bool);
    Setter set = key == "PROFILE_REPORT_INPUT_SHAPES" ? &v1::KinetoTraceOptions::set_record_shapes
                 : key == "PROFILE_PROFILE_MEMORY"    ? &v1::KinetoTraceOptions::set_profile_memory
                 : key == "PROFILE_WITH_STACK"        ? &v1::KinetoTraceOptions::set_with_stack
                 : key == "PROFILE_WITH_FLOPS"        ? &v1::KinetoTraceOptions::set_with_flops
                 : key == "PROFILE_WITH_MODULES"      ? &v1::KinetoTraceOptions::set_with_modules
                                                      : nullptr;
    if (set == nullptr) return false;
    absl::StatusOr<bool> on = ParseBool(value);
    if (!on.ok()) return on.status();
    (c->options.*set)(*on);
  }
  return true;
}

}  // namespace

absl::StatusOr<DynoTraceConfig> ParseDynoConfig(absl::string_view text) {
  if (text.size() > kDynoMaxConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config of ", text.size(), " bytes is over the limit of ", kDynoMaxConfigBytes));
  }
  DynoTraceConfig config;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("config line ", line_number, " \"", Excerpt(line), "\" is not KEY=VALUE"));
    }
    absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, eq));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    absl::StatusOr<bool> taken = ApplyKey(key, value, &config);
    if (!taken.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("config line ", line_number, ": ",
                                                     Excerpt(key), ": ", taken.status().message()));
    }
    if (!*taken && std::find(config.ignored_keys.begin(), config.ignored_keys.end(), key) ==
                       config.ignored_keys.end()) {
      config.ignored_keys.push_back(Excerpt(key));
    }
  }
  return config;
}

v1::TraceRequest DynoTraceRequest(const DynoTraceConfig& config) {
  v1::TraceRequest request;
  if (config.iterations > 0) {
    request.set_iterations(config.iterations);
    if (config.start_iteration.has_value()) request.set_start_step(*config.start_iteration);
    request.set_step_roundup(config.iteration_roundup);
    // The duration, when given, bounds the wait for the steps.
    if (config.duration.has_value())
      *request.mutable_duration() = ToProtoDuration(*config.duration);
  } else {
    *request.mutable_duration() = ToProtoDuration(config.duration.value_or(kDynoDefaultDuration));
  }
  if (config.start_time.has_value() && config.iterations == 0) {
    *request.mutable_start_time() = ToProtoTimestamp(*config.start_time);
  }
  // The bridge's names for the PROFILE_* flags (TraceRequest.kineto_options).
  const v1::KinetoTraceOptions& o = config.options;
  for (const auto& [on, name] :
       {std::pair{o.with_stack(), "with_stack"}, std::pair{o.record_shapes(), "record_shapes"},
        std::pair{o.profile_memory(), "profile_memory"}, std::pair{o.with_flops(), "with_flops"},
        std::pair{o.with_modules(), "with_modules"}}) {
    if (on) request.add_kineto_options(name);
  }
  return request;
}

}  // namespace gpuctl::daemon
