// gpuctl_convert_fixture: turns a JSON description of one process's capture
// into a record payload (the test encoder, PayloadBuilder) and runs it
// through the daemon's own path — ProcessCapture: record reader, Chrome
// trace converter, gzip, LocalTraceStore — so tests of trace consumers
// (Holistic Trace Analysis) check what gpuctld really writes.
//
// Usage:
//   gpuctl_convert_fixture --spec SPEC.json --store DIR --trace-id UUIDV7
//                          [--payload-out FILE] [--result-out FILE]
// Writes DIR/<trace id>/<host>-rank<r>-pid<p>.json.gz and prints its path.
// --payload-out also saves the binary payload (fuzz corpus seeds);
// --result-out the process's manifest entry (ProcessResult, protobuf JSON
// with the proto's field names), its ingest summary included.
//
// Spec (times are ns after window_start_ns; every list optional):
//   {"pid": 100, "rank": 0, "world_size": 2, "host": "h", "job_id": "j",
//    "window_start_ns": N, "window_ns": N,
//    "devices": [0, 1],                         // kDeviceInfo with H100 figures
//    "ranges": [{"tid", "start", "end", "name", "id"}],
//    "steps": [{"tid", "ts", "step"}],
//    "api_calls": [{"tid", "start", "end", "name", "correlation", "cbid", "driver"}],
//    "kernels": [{"device", "stream", "start", "end", "name", "correlation",
//                 "grid": [x, y, z], "block": [x, y, z], "registers"}],
//    "memcpys": [{"device", "stream", "start", "end", "bytes", "kind", "correlation"}],
//    "memsets": [{"device", "stream", "start", "end", "bytes", "correlation"}],
//    "syncs": [{"type", "stream", "start", "end", "correlation"}],  // context 1
//    "external": [{"correlation", "range_id"}]}
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "daemon/convert/testing/payload_builder.h"
#include "daemon/core/capture_processor.h"
#include "daemon/core/testing/vector_payload.h"
#include "daemon/store/local_store.h"
#include "daemon/store/trace_file_name.h"
#include "google/protobuf/util/json_util.h"
#include "gpuctl/v1/records.h"
#include "nlohmann/json.hpp"

namespace gpuctl {
namespace {

using nlohmann::json;
using testing::PayloadBuilder;

struct Args {
  std::string spec;
  std::string store;
  std::string trace_id;
  std::string payload_out;
  std::string result_out;
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    std::string value = argv[i + 1];
    if (flag == "--spec") {
      args->spec = value;
    } else if (flag == "--store") {
      args->store = value;
    } else if (flag == "--trace-id") {
      args->trace_id = value;
    } else if (flag == "--payload-out") {
      args->payload_out = value;
    } else if (flag == "--result-out") {
      args->result_out = value;
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && !args->spec.empty() && !args->store.empty() && !args->trace_id.empty();
}

void Fill3(const json& j, const char* key, int32_t (&out)[3]) {
  if (!j.contains(key)) return;
  for (int i = 0; i < 3; ++i) out[i] = j[key].at(i).get<int32_t>();
}

std::vector<uint8_t> BuildPayload(const json& spec) {
  const int64_t t0 = spec.at("window_start_ns").get<int64_t>();
  PayloadBuilder b(spec.at("pid").get<int32_t>(), t0, t0 + spec.at("window_ns").get<int64_t>());
  auto at = [t0](const json& e, const char* key) { return t0 + e.at(key).get<int64_t>(); };
  for (const json& d : spec.value("devices", json::array())) {
    b.AddDeviceInfo({.device = d.get<uint32_t>()});
  }
  b.AddCaptureInfo({});
  for (const json& r : spec.value("ranges", json::array())) {
    b.AddRange(r.at("tid").get<uint32_t>(), at(r, "start"), at(r, "end"),
               r.at("name").get<std::string>(), r.value("depth", 0u), r.at("id").get<uint64_t>());
  }
  for (const json& s : spec.value("steps", json::array())) {
    b.AddStep(s.at("tid").get<uint32_t>(), at(s, "ts"), s.at("step").get<uint64_t>());
  }
  for (const json& a : spec.value("api_calls", json::array())) {
    b.AddApiCall({.domain = a.value("driver", false) ? records::kApiDomainDriver
                                                     : records::kApiDomainRuntime,
                  .cbid = a.value("cbid", 211u),
                  .correlation = a.at("correlation").get<uint32_t>(),
                  .pid = spec.at("pid").get<uint32_t>(),
                  .tid = a.at("tid").get<uint32_t>(),
                  .start_ns = at(a, "start"),
                  .end_ns = at(a, "end"),
                  .name = a.value("name", std::string("cudaLaunchKernel"))});
  }
  for (const json& e : spec.value("external", json::array())) {
    b.AddExternalCorrelation(records::kExternalKindGpuctlRange, e.at("correlation").get<uint32_t>(),
                             e.at("range_id").get<uint64_t>());
  }
  for (const json& k : spec.value("kernels", json::array())) {
    testing::KernelSpec ks{.device = k.value("device", 0u),
                           .stream = k.value("stream", 7u),
                           .correlation = k.value("correlation", 0u),
                           .name = k.at("name").get<std::string>(),
                           .start_ns = at(k, "start"),
                           .end_ns = at(k, "end"),
                           .registers_per_thread = k.value("registers", 32u)};
    Fill3(k, "grid", ks.grid);
    Fill3(k, "block", ks.block);
    b.AddKernel(ks);
  }
  for (const json& m : spec.value("memcpys", json::array())) {
    b.AddMemcpy({.device = m.value("device", 0u),
                 .stream = m.value("stream", 7u),
                 .correlation = m.value("correlation", 0u),
                 .copy_kind = m.value("kind", uint8_t{1}),
                 .start_ns = at(m, "start"),
                 .end_ns = at(m, "end"),
                 .bytes = m.value("bytes", uint64_t{0})});
  }
  for (const json& m : spec.value("memsets", json::array())) {
    b.AddMemset({.device = m.value("device", 0u),
                 .stream = m.value("stream", 7u),
                 .correlation = m.value("correlation", 0u),
                 .start_ns = at(m, "start"),
                 .end_ns = at(m, "end"),
                 .bytes = m.value("bytes", uint64_t{0})});
  }
  for (const json& y : spec.value("syncs", json::array())) {
    b.AddSync({.type = y.value("type", 3u),
               .stream = y.value("stream", 7u),
               .correlation = y.value("correlation", 0u),
               .start_ns = at(y, "start"),
               .end_ns = at(y, "end")});
  }
  return b.Build();
}

int Run(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::cerr << "usage: gpuctl_convert_fixture --spec SPEC.json --store DIR --trace-id ID "
                 "[--payload-out FILE] [--result-out FILE]\n";
    return 2;
  }
  std::ifstream in(args.spec);
  json spec = json::parse(in);
  std::vector<uint8_t> payload = BuildPayload(spec);
  if (!args.payload_out.empty()) {
    std::ofstream out(args.payload_out, std::ios::binary);
    out.write(reinterpret_cast<const char*>(payload.data()),  // NOLINT
              static_cast<std::streamsize>(payload.size()));
  }
  auto store = daemon::LocalTraceStore::Create(args.store);
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  daemon::CaptureJob job;
  job.trace_id = args.trace_id;
  job.host = spec.value("host", std::string("fixture-host"));
  job.process.set_pid(spec.at("pid").get<int32_t>());
  job.own_pid = job.process.pid();
  job.process.set_rank(spec.value("rank", -1));
  job.process.set_world_size(spec.value("world_size", -1));
  job.process.set_job_id(spec.value("job_id", std::string("fixture-job")));
  job.process.add_cmdline("python3");
  job.file_name = daemon::TraceFileName(job.host, job.process.rank(), job.process.pid());
  job.payload = std::make_unique<testing::VectorPayload>(std::move(payload));
  v1::ProcessResult result = daemon::ProcessCapture(std::move(job), store->get());
  if (result.status() != v1::CAPTURE_STATUS_OK) {
    std::cerr << v1::CaptureStatus_Name(result.status()) << ": " << result.message() << "\n";
    return 1;
  }
  if (!args.result_out.empty()) {
    std::string text;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    if (!google::protobuf::util::MessageToJsonString(result, &text, options).ok()) return 1;
    std::ofstream(args.result_out) << text;
  }
  std::cout << (*store)->Location(args.trace_id) << "/" << result.file() << "\n";
  return 0;
}

}  // namespace
}  // namespace gpuctl

int main(int argc, char** argv) {
  try {
    return gpuctl::Run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gpuctl_convert_fixture: " << e.what() << "\n";
    return 1;
  }
}
