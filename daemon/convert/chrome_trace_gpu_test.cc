// GPU records through the Chrome trace converter: kineto's categories,
// names, rows, args, flows and top-level GPU fields.
#include <string>
#include <vector>

#include "daemon/convert/chrome_trace.h"
#include "daemon/convert/testing/payload_builder.h"
#include "gpuctl/v1/records.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::testing::PayloadBuilder;
using nlohmann::json;

constexpr int32_t kPid = 4242;
constexpr int64_t kStart = 1704067200'250'000'000;  // base: ...200'000'000'000
constexpr int64_t kEnd = kStart + 1'000'000'000;
constexpr uint32_t kTid = 31;

json Convert(const std::vector<uint8_t>& payload) {
  RecordReaderOptions options;
  options.expected_pid = kPid;
  auto records = ReadRecords(payload, options);
  EXPECT_TRUE(records.ok()) << records.status();
  ChromeTraceMeta meta;
  meta.trace_id = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b";
  meta.process.set_pid(kPid);
  meta.process.set_rank(1);
  meta.process.set_world_size(2);
  StringSink sink;
  EXPECT_TRUE(WriteChromeTrace(*records, meta, &sink).ok());
  return json::parse(sink.str());
}

std::vector<json> Where(const json& doc, const std::string& key, const std::string& value) {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"]) {
    if (e.contains(key) && e[key] == value) out.push_back(e);
  }
  return out;
}

json Only(const json& doc, const std::string& key, const std::string& value) {
  auto events = Where(doc, key, value);
  EXPECT_EQ(events.size(), 1u) << key << "=" << value;
  return events.empty() ? json() : events[0];
}

TEST(ChromeTraceGpuTest, KernelLikeKineto) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddDeviceInfo({.device = 0});
  b.AddKernel({.device = 0,
               .context = 1,
               .stream = 7,
               .correlation = 5,
               .name = "gemm_kernel",
               .start_ns = kStart + 2'000'500,
               .end_ns = kStart + 3'000'750,
               .grid = {264, 1, 1},
               .block = {256, 1, 1},
               .registers_per_thread = 32,
               .static_shared_memory = 512,
               .dynamic_shared_memory = 256});
  b.AddKernel({.device = 2,
               .stream = 9,
               .name = "graph_kernel",
               .start_ns = kStart,
               .end_ns = kStart + 1,
               .graph_id = 3,
               .graph_node_id = 12});
  json doc = Convert(b.Build());
  json k = Only(doc, "name", "gemm_kernel");
  EXPECT_EQ(k["ph"], "X");
  EXPECT_EQ(k["cat"], "kernel");
  EXPECT_EQ(k["pid"], 0);
  EXPECT_EQ(k["tid"], 7);
  EXPECT_DOUBLE_EQ(k["ts"].get<double>(), 252000.5);
  EXPECT_DOUBLE_EQ(k["dur"].get<double>(), 1000.25);
  const json& a = k["args"];
  EXPECT_FALSE(a.contains("External id"));
  EXPECT_EQ(a["device"], 0);
  EXPECT_EQ(a["context"], 1);
  EXPECT_EQ(a["stream"], 7);
  EXPECT_EQ(a["correlation"], 5);
  EXPECT_EQ(a["registers per thread"], 32);
  EXPECT_EQ(a["shared memory"], 768);
  EXPECT_DOUBLE_EQ(a["blocks per SM"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(a["warps per SM"].get<double>(), 16.0);
  EXPECT_EQ(a["grid"], json::array({264, 1, 1}));
  EXPECT_EQ(a["block"], json::array({256, 1, 1}));
  EXPECT_EQ(a["est. achieved occupancy %"], 25);
  EXPECT_FALSE(a.contains("graph id"));
  // No kDeviceInfo for device 2: no occupancy figures; graph ids when set.
  json g = Only(doc, "name", "graph_kernel");
  EXPECT_EQ(g["pid"], 2);
  EXPECT_FALSE(g["args"].contains("blocks per SM"));
  EXPECT_FALSE(g["args"].contains("est. achieved occupancy %"));
  EXPECT_EQ(g["args"]["graph id"], 3);
  EXPECT_EQ(g["args"]["graph node id"], 12);
}

TEST(ChromeTraceGpuTest, CopiesAndMemsets) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddMemcpy({.stream = 3,
               .correlation = 8,
               .start_ns = kStart,
               .end_ns = kStart + 1000,
               .bytes = 4'000'000});
  b.AddMemcpy({.device = 1,
               .context = 4,
               .stream = 5,
               .copy_kind = 10,
               .src_kind = 3,
               .flags = records::kMemcpyFlagPeer,
               .start_ns = kStart,
               .end_ns = kStart,
               .bytes = 64,
               .src_device = 1,
               .dst_device = 2,
               .src_context = 4,
               .dst_context = 6});
  b.AddMemset({.stream = 3, .start_ns = kStart, .end_ns = kStart + 2000, .bytes = 1000});
  json doc = Convert(b.Build());
  json h2d = Only(doc, "name", "Memcpy HtoD (Pinned -> Device)");
  EXPECT_EQ(h2d["cat"], "gpu_memcpy");
  EXPECT_EQ(h2d["pid"], 0);
  EXPECT_EQ(h2d["tid"], 3);
  EXPECT_EQ(h2d["args"]["bytes"], 4000000);
  EXPECT_DOUBLE_EQ(h2d["args"]["memory bandwidth (GB/s)"].get<double>(), 4000.0);
  EXPECT_EQ(h2d["args"]["correlation"], 8);
  EXPECT_FALSE(h2d["args"].contains("fromDevice"));
  json p2p = Only(doc, "name", "Memcpy PtoP (Device -> Device)");
  EXPECT_EQ(p2p["pid"], 1);
  EXPECT_EQ(p2p["args"]["fromDevice"], 1);
  EXPECT_EQ(p2p["args"]["inDevice"], 1);
  EXPECT_EQ(p2p["args"]["toDevice"], 2);
  EXPECT_EQ(p2p["args"]["fromContext"], 4);
  EXPECT_EQ(p2p["args"]["toContext"], 6);
  EXPECT_EQ(p2p["args"]["memory bandwidth (GB/s)"], "N/A");  // zero duration
  json memset = Only(doc, "name", "Memset (Device)");
  EXPECT_EQ(memset["cat"], "gpu_memset");
  EXPECT_DOUBLE_EQ(memset["args"]["memory bandwidth (GB/s)"].get<double>(), 0.5);
}

TEST(ChromeTraceGpuTest, ApiCallsFlowsAndExternalIds) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddRange(kTid, kStart, kStart + 100'000, "forward", 0, 17);
  b.AddApiCall({.correlation = 5, .tid = kTid, .start_ns = kStart + 1000, .end_ns = kStart + 2000});
  b.AddApiCall({.domain = records::kApiDomainDriver,
                .cbid = 307,
                .correlation = 5,
                .tid = kTid,
                .start_ns = kStart + 1200,
                .end_ns = kStart + 1800,
                .name = "cuLaunchKernel"});
  b.AddApiCall({.cbid = 1,
                .correlation = 6,
                .tid = kTid,
                .start_ns = kStart + 3000,
                .end_ns = kStart + 3100,
                .name = "cudaGetDeviceCount"});
  b.AddExternalCorrelation(records::kExternalKindGpuctlRange, 5, 17);
  b.AddExternalCorrelation(0, 6, 99);  // another tool's kind: not ours
  // Two kernels of one launch (a graph launch does this), one unlinked.
  b.AddKernel({.stream = 7,
               .correlation = 5,
               .name = "k1",
               .start_ns = kStart + 5000,
               .end_ns = kStart + 6000});
  b.AddKernel({.stream = 8,
               .correlation = 5,
               .name = "k2",
               .start_ns = kStart + 7000,
               .end_ns = kStart + 8000});
  b.AddKernel({.stream = 7,
               .correlation = 77,
               .name = "orphan",
               .start_ns = kStart + 9000,
               .end_ns = kStart + 9500});
  json doc = Convert(b.Build());

  json rt = Only(doc, "name", "cudaLaunchKernel");
  EXPECT_EQ(rt["cat"], "cuda_runtime");
  EXPECT_EQ(rt["pid"], kPid);
  EXPECT_EQ(rt["tid"], kTid);
  EXPECT_EQ(rt["args"]["cbid"], 211);
  EXPECT_EQ(rt["args"]["correlation"], 5);
  EXPECT_EQ(rt["args"]["External id"], 17);
  json drv = Only(doc, "name", "cuLaunchKernel");
  EXPECT_EQ(drv["cat"], "cuda_driver");
  EXPECT_EQ(drv["args"]["External id"], 17);
  EXPECT_FALSE(Only(doc, "name", "cudaGetDeviceCount")["args"].contains("External id"));
  EXPECT_EQ(Only(doc, "name", "k1")["args"]["External id"], 17);
  EXPECT_EQ(Only(doc, "name", "k2")["args"]["External id"], 17);
  EXPECT_FALSE(Only(doc, "name", "orphan")["args"].contains("External id"));
  EXPECT_EQ(Only(doc, "name", "forward")["args"]["External id"], 17);

  // One start at the runtime call (preferred over the driver call), one end
  // per GPU op of that correlation, none for the orphan.
  auto starts = Where(doc, "ph", "s");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0]["id"], 5);
  EXPECT_EQ(starts[0]["pid"], kPid);
  EXPECT_EQ(starts[0]["tid"], kTid);
  EXPECT_DOUBLE_EQ(starts[0]["ts"].get<double>(), 250001.0);
  EXPECT_EQ(starts[0]["cat"], "ac2g");
  EXPECT_EQ(starts[0]["name"], "ac2g");
  EXPECT_FALSE(starts[0].contains("bp"));
  auto ends = Where(doc, "ph", "f");
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0]["id"], 5);
  EXPECT_EQ(ends[0]["pid"], 0);
  EXPECT_EQ(ends[0]["tid"], 7);
  EXPECT_DOUBLE_EQ(ends[0]["ts"].get<double>(), 250005.0);
  EXPECT_EQ(ends[0]["bp"], "e");
  EXPECT_EQ(ends[0]["cat"], "ac2g");
  EXPECT_EQ(ends[1]["tid"], 8);
}

TEST(ChromeTraceGpuTest, SynchronizationRows) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddKernel({.device = 3, .context = 9, .stream = 7, .start_ns = kStart, .end_ns = kStart + 1});
  b.AddApiCall({.cbid = 131,
                .correlation = 20,
                .tid = kTid,
                .start_ns = kStart + 10,
                .end_ns = kStart + 500,
                .name = "cudaStreamSynchronize"});
  b.AddSync({.type = 3,
             .context = 9,
             .stream = 7,
             .correlation = 20,
             .start_ns = kStart + 10,
             .end_ns = kStart + 400});
  b.AddSync({.type = 1,
             .context = 9,
             .stream = records::kInvalidId,
             .cuda_event = 4,
             .start_ns = kStart + 10,
             .end_ns = kStart + 20});
  b.AddApiCall({.cbid = 165,
                .correlation = 21,
                .tid = kTid + 1,
                .start_ns = kStart + 30,
                .end_ns = kStart + 40,
                .name = "cudaDeviceSynchronize"});
  b.AddSync({.type = 4,
             .context = 55,
             .stream = records::kInvalidId,
             .correlation = 21,
             .start_ns = kStart + 30,
             .end_ns = kStart + 40});
  json doc = Convert(b.Build());
  json stream = Only(doc, "name", "Stream Sync");
  EXPECT_EQ(stream["cat"], "cuda_sync");
  // Kineto's row for a stream's synchronizations: stream + 1000000, named
  // "stream 7 (sync)" and sorted with stream 7.
  EXPECT_EQ(stream["pid"], 3);
  EXPECT_EQ(stream["tid"], 1000007);
  EXPECT_EQ(stream["args"]["cuda_sync_kind"], "Stream Sync");
  // Host time, not GPU work: no stream for consumers that count every
  // event with one as busy; the stream waited for is "sync stream".
  EXPECT_EQ(stream["args"]["stream"], -1);
  EXPECT_EQ(stream["args"]["sync stream"], 7);
  EXPECT_EQ(stream["args"]["device"], 3);
  EXPECT_EQ(stream["args"]["context"], 9);
  EXPECT_EQ(stream["args"]["correlation"], 20);
  bool named = false, sorted = false;
  for (const json& m : Where(doc, "ph", "M")) {
    if (m["pid"] != 3 || m["tid"] != 1000007) continue;
    if (m["name"] == "thread_name") named = m["args"]["name"] == "stream 7 (sync)";
    if (m["name"] == "thread_sort_index") sorted = m["args"]["sort_index"] == 7;
  }
  EXPECT_TRUE(named);
  EXPECT_TRUE(sorted);
  json event = Only(doc, "name", "Event Sync");
  EXPECT_EQ(event["tid"], -1);
  EXPECT_EQ(event["args"]["stream"], -1);
  EXPECT_EQ(event["args"]["sync stream"], -1);
  EXPECT_EQ(event["args"]["wait_on_cuda_event_id"], 4);
  for (const json& e : Where(doc, "cat", "cuda_sync")) EXPECT_EQ(e["args"]["stream"], -1) << e;
  // A context with no GPU op in the window: the calling thread's row.
  json context = Only(doc, "name", "Context Sync");
  EXPECT_EQ(context["pid"], kPid);
  EXPECT_EQ(context["tid"], kTid + 1);
  EXPECT_FALSE(context["args"].contains("device"));
  // cudaStreamSynchronize -> Stream Sync flow, as kineto draws it.
  auto ends = Where(doc, "ph", "f");
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0]["id"], 20);
  EXPECT_EQ(ends[0]["pid"], 3);
  EXPECT_EQ(ends[0]["tid"], 1000007);
  EXPECT_EQ(Where(doc, "ph", "s").size(), 2u);
}

TEST(ChromeTraceGpuTest, MarkersAndOverhead) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddMarker({.tid = kTid,
               .marker_id = 3,
               .start_ns = kStart + 1000,
               .end_ns = kStart + 3000,
               .name = "nvtx range",
               .domain = "app"});
  b.AddMarker({.tid = kTid,
               .marker_id = 4,
               .start_ns = kStart + 2000,
               .end_ns = kStart + 2000,
               .name = "nvtx mark",
               .flags = records::kMarkerFlagInstant});
  b.AddOverhead({.start_ns = kStart + 10, .end_ns = kStart + 20});
  json doc = Convert(b.Build());
  json range = Only(doc, "name", "nvtx range");
  EXPECT_EQ(range["ph"], "X");
  EXPECT_EQ(range["cat"], "user_annotation");
  EXPECT_EQ(range["pid"], kPid);
  EXPECT_EQ(range["tid"], kTid);
  EXPECT_DOUBLE_EQ(range["dur"].get<double>(), 2.0);
  EXPECT_EQ(range["args"]["nvtx domain"], "app");
  EXPECT_EQ(range["args"]["nvtx marker id"], 3);
  json mark = Only(doc, "name", "nvtx mark");
  EXPECT_EQ(mark["ph"], "i");
  EXPECT_EQ(mark["s"], "t");
  EXPECT_FALSE(mark.contains("dur"));
  EXPECT_FALSE(mark["args"].contains("nvtx domain"));
  json overhead = Only(doc, "cat", "overhead");
  EXPECT_EQ(overhead["name"], "Buffer Flush");
  EXPECT_EQ(overhead["pid"], -1);
  EXPECT_EQ(overhead["tid"], 0);
  // The thread of the markers is named on the host row.
  bool named = false;
  for (const json& e : Where(doc, "name", "thread_name")) {
    named |= e["pid"] == kPid && e["tid"] == kTid;
  }
  EXPECT_TRUE(named);
}

TEST(ChromeTraceGpuTest, GpuRowMetadataSortsAfterHost) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddKernel({.device = 1, .stream = 13, .start_ns = kStart, .end_ns = kStart + 1});
  b.AddKernel({.device = 1, .stream = 7, .start_ns = kStart, .end_ns = kStart + 1});
  b.AddMemset({.device = 0, .stream = 7, .start_ns = kStart, .end_ns = kStart + 1});
  b.AddOverhead({.start_ns = kStart, .end_ns = kStart + 1});
  json doc = Convert(b.Build());
  std::vector<std::string> gpu_names;
  for (const json& e : Where(doc, "name", "process_name")) {
    if (e["pid"] == 0 || e["pid"] == 1) gpu_names.push_back(e["args"]["name"]);
    if (e["pid"] == -1) {
      EXPECT_EQ(e["args"]["name"], "CUPTI Overhead");
    }
  }
  EXPECT_EQ(gpu_names, (std::vector<std::string>{"GPU 0", "GPU 1"}));
  for (const json& e : Where(doc, "name", "process_labels")) {
    if (e["pid"] == 1) {
      EXPECT_EQ(e["args"]["labels"], "GPU 1");
    }
  }
  for (const json& e : Where(doc, "name", "process_sort_index")) {
    if (e["pid"] == 1) {
      EXPECT_EQ(e["args"]["sort_index"], 5000001);
    }
    if (e["pid"] == kPid) {
      EXPECT_EQ(e["args"]["sort_index"], kPid);
    }
    if (e["pid"] == -1) {
      EXPECT_EQ(e["args"]["sort_index"], 0x100000);
    }
  }
  std::vector<std::string> streams;
  for (const json& e : Where(doc, "name", "thread_name")) {
    if (e["pid"] == 1) streams.push_back(e["args"]["name"]);
  }
  EXPECT_EQ(streams, (std::vector<std::string>{"stream 7", "stream 13"}));
  for (const json& e : Where(doc, "name", "thread_sort_index")) {
    if (e["pid"] == 1 && e["tid"] == 13) {
      EXPECT_EQ(e["args"]["sort_index"], 13);
    }
  }
}

TEST(ChromeTraceGpuTest, DeviceProperties) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddDeviceInfo({.device = 1, .name = "GPU \"B\""});
  b.AddDeviceInfo({.device = 0, .compute_major = 7, .max_shared_memory_per_sm = 98304});
  json doc = Convert(b.Build());
  const json& props = doc["deviceProperties"];
  ASSERT_EQ(props.size(), 2u);
  EXPECT_EQ(props[0]["id"], 0);  // by device id
  EXPECT_EQ(props[0]["sharedMemPerBlockOptin"], 98304);
  const json& p = props[1];
  EXPECT_EQ(p["id"], 1);
  EXPECT_EQ(p["name"], "GPU \"B\"");
  EXPECT_EQ(p["totalGlobalMem"], 85029158912ull);
  EXPECT_EQ(p["computeMajor"], 9);
  EXPECT_EQ(p["computeMinor"], 0);
  EXPECT_EQ(p["maxThreadsPerBlock"], 1024);
  EXPECT_EQ(p["maxThreadsPerMultiprocessor"], 2048);
  EXPECT_EQ(p["regsPerBlock"], 65536);
  EXPECT_EQ(p["regsPerMultiprocessor"], 65536);
  EXPECT_EQ(p["warpSize"], 32);
  EXPECT_EQ(p["sharedMemPerBlock"], 49152);
  EXPECT_EQ(p["sharedMemPerMultiprocessor"], 233472);
  EXPECT_EQ(p["numSms"], 132);
  EXPECT_EQ(p["sharedMemPerBlockOptin"], 232448);
}

TEST(ChromeTraceGpuTest, CaptureInfo) {
  PayloadBuilder host(kPid, kStart, kEnd);
  host.AddCaptureInfo({.flags = records::kCaptureFlagHostOnly,
                       .activities = 0xef,
                       .cupti_version = 0,
                       .message = "no CUDA library is loaded",
                       .cupti_path = ""});
  const json g = Convert(host.Build())["gpuctl"];
  EXPECT_EQ(g["host_only"], true);
  EXPECT_EQ(g["host_only_reason"], "no CUDA library is loaded");
  EXPECT_EQ(g["activities"],
            json::array({"kernel", "memcpy", "memset", "runtime", "sync", "nvtx", "overhead"}));
  EXPECT_EQ(g["cupti_active"], false);

  PayloadBuilder gpu(kPid, kStart, kEnd);
  gpu.set_dropped_events(12);
  gpu.AddCaptureInfo({.flags = records::kCaptureFlagCuptiActive | records::kCaptureFlagCuptiFailed,
                      .activities = records::kActivityKernel | records::kActivityDriver,
                      .dropped_by_cupti = 5,
                      .dropped_at_cap = 7,
                      .message = "flush failed"});
  const json f = Convert(gpu.Build())["gpuctl"];
  EXPECT_EQ(f["host_only"], false);
  EXPECT_EQ(f["host_only_reason"], "");
  EXPECT_EQ(f["activities"], json::array({"kernel", "driver"}));
  EXPECT_EQ(f["cupti_version"], 130001);
  EXPECT_EQ(f["cupti_path"], "/usr/local/cuda/lib64/libcupti.so.13");
  EXPECT_EQ(f["cupti_active"], true);
  EXPECT_EQ(f["cupti_failed"], true);
  EXPECT_EQ(f["cupti_message"], "flush failed");
  EXPECT_EQ(f["dropped_events"], 12);
  EXPECT_EQ(f["cupti_dropped_records"], 5);
  EXPECT_EQ(f["dropped_at_cap"], 7);

  // Without a capture info record (a host-only library): defaults.
  const json none = Convert(PayloadBuilder(kPid, kStart, kEnd).Build())["gpuctl"];
  EXPECT_EQ(none["host_only"], false);
  EXPECT_EQ(none["activities"], json::array());
  EXPECT_EQ(none["cupti_dropped_records"], 0);
}

}  // namespace
}  // namespace gpuctl::daemon
