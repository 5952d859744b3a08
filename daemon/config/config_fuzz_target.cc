// libFuzzer entry point for the configuration parser. Built as a fuzzer
// with Clang (gpuctl_config_fuzzer) and linked into gpuctl_config_fuzz_test,
// which replays the seed corpus and mutations of it under any compiler.
// Besides not crashing, the parser must keep its contract: errors are
// INVALID_ARGUMENT naming the file, and what it accepts is valid.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "daemon/config/config_values.h"
#include "daemon/config/daemon_config.h"
#include "daemon/s3/s3_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuctl::daemon;  // NOLINT(google-build-using-namespace)
  absl::string_view text(static_cast<const char*>(static_cast<const void*>(data)), size);
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where = ParseDaemonConfig(text, "fuzz.yaml", &options);
  if (!where.ok()) {
    if (where.status().code() != absl::StatusCode::kInvalidArgument ||
        !absl::StartsWith(where.status().message(), "fuzz.yaml")) {
      std::abort();
    }
    // A failed parse leaves the options as they were.
    if (options.s3.has_value() || options.store_dir != kDefaultStoreDir) std::abort();
    return 0;
  }
  bool valid =
      options.max_buffer_bytes <= options.max_payload_bytes &&
      options.max_duration > absl::ZeroDuration() && options.result_grace > absl::ZeroDuration() &&
      options.start_delay >= absl::ZeroDuration() && options.start_delay <= kMaxStartDelay &&
      (options.host_name.empty() || CheckHostName(options.host_name).ok()) &&
      !options.store_dir.empty() && !options.socket_path.empty() &&
      !options.listen_address.empty() &&
      (!options.s3.has_value() || gpuctl::s3::ValidateS3Config(*options.s3).ok());
  if (!valid) std::abort();
  return 0;
}
