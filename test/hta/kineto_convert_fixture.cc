// gpuctl_kineto_convert_fixture: runs a kineto trace file through the
// daemon's kineto converter (ConvertKinetoTrace: validate, tag, gzip) and
// writes the result where gpuctld would store it, so tests of trace
// consumers (Holistic Trace Analysis) read what gpuctld really writes.
//
// Usage:
//   gpuctl_kineto_convert_fixture --in TRACE.json --dir DIR --trace-id ID
//                                 --host H --rank R --pid P [--job J]
// Writes DIR/<host>-rank<r>-pid<p>.json.gz and prints its path, then the
// summary as one JSON line.
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>

#include "daemon/convert/gzip.h"
#include "daemon/convert/kineto_trace.h"
#include "daemon/store/trace_file_name.h"
#include "nlohmann/json.hpp"

namespace gpuctl {
namespace {

int Run(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  for (const char* required : {"--in", "--dir", "--trace-id", "--host", "--rank", "--pid"}) {
    if (!args.contains(required)) {
      std::cerr << "missing " << required << "\n";
      return 2;
    }
  }
  std::ifstream in(args["--in"], std::ios::binary);
  std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  daemon::KinetoTraceTag tag{.trace_id = args["--trace-id"],
                             .host = args["--host"],
                             .rank = std::stoi(args["--rank"]),
                             .pid = std::stoi(args["--pid"]),
                             .job_id = args["--job"]};
  auto converted = daemon::ConvertKinetoTrace(json, tag, daemon::kDefaultGzipLevel);
  if (!converted.ok()) {
    std::cerr << converted.status() << "\n";
    return 1;
  }
  std::string path = args["--dir"] + "/" + daemon::TraceFileName(tag.host, tag.rank, tag.pid);
  std::ofstream out(path, std::ios::binary);
  out << converted->gzip;
  out.close();
  if (!out) {
    std::cerr << "cannot write " << path << "\n";
    return 1;
  }
  const daemon::KinetoTraceSummary& s = converted->summary;
  nlohmann::json summary = {
      {"event_count", s.event_count},         {"cpu_op_count", s.cpu_op_count},
      {"kernel_count", s.kernel_count},       {"first_ts_unix_ns", s.first_ts_unix_ns},
      {"last_ts_unix_ns", s.last_ts_unix_ns}, {"trace_id_in_file", s.trace_id_in_file}};
  std::cout << path << "\n" << summary.dump() << "\n";
  return 0;
}

}  // namespace
}  // namespace gpuctl

int main(int argc, char** argv) {
  try {
    return gpuctl::Run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gpuctl_kineto_convert_fixture: " << e.what() << "\n";
    return 1;
  }
}
