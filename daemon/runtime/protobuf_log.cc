#include "daemon/runtime/protobuf_log.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"
#include "daemon/common/log.h"
#include "google/protobuf/stubs/logging.h"

namespace gpuctl::daemon {
namespace {

void LogFromProtobuf(google::protobuf::LogLevel level, const char* filename, int line,
                     const std::string& message) {
  // libprotobuf reports at ERROR mostly what came from outside (a client's
  // string field that is not UTF-8), which the daemon answers as a bad
  // request: a warning here, not an error of the daemon's.
  LogLevel ours = LogLevel::kWarning;
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      ours = LogLevel::kInfo;
      break;
    case google::protobuf::LOGLEVEL_FATAL:
      ours = LogLevel::kError;
      break;
    default:
      break;
  }
  Log(ours, "libprotobuf",
      {{"detail", ClampMessage(message)}, {"at", absl::StrCat(filename, ":", line)}});
}

}  // namespace

void RouteProtobufLogs() { google::protobuf::SetLogHandler(&LogFromProtobuf); }

}  // namespace gpuctl::daemon
