// libFuzzer entry point for the record reader and the JSON converter. Built
// as a fuzzer with Clang (gpuctl_record_reader_fuzzer) and linked into
// record_reader_fuzz_test, which replays the seed corpus and mutations of it
// under any compiler.
#include <cstddef>
#include <cstdint>

#include "daemon/convert/chrome_trace.h"
#include "daemon/convert/record_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuctl::daemon;  // NOLINT(google-build-using-namespace)
  RecordReaderOptions options;
  // Take the pid from the input so the fuzzer gets past that check.
  if (size >= 92) {
    options.expected_pid = static_cast<int32_t>(
        static_cast<uint32_t>(data[88]) | (static_cast<uint32_t>(data[89]) << 8) |
        (static_cast<uint32_t>(data[90]) << 16) | (static_cast<uint32_t>(data[91]) << 24));
  }
  auto records = ReadRecords(absl::MakeConstSpan(data, size), options);
  if (!records.ok()) return 0;
  ChromeTraceMeta meta;
  meta.process.set_pid(records->pid);
  StringSink sink;
  (void)WriteChromeTrace(*records, meta, &sink);
  return 0;
}
