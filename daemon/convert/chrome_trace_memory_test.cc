// Device memory records through the reader and the Chrome trace converter:
// the per-device counter track, the instants' args, and the records the
// reader skips and counts.
#include <cstdint>
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
constexpr uint64_t kMiB = uint64_t{1} << 20;

records::MemoryRecord Alloc(uint32_t device, uint64_t address, uint64_t bytes, int64_t ts) {
  records::MemoryRecord m;
  m.device_id = device;
  m.context_id = device + 1;
  m.stream_id = records::kInvalidId;
  m.correlation_id = 9;
  m.operation = records::kMemoryOpAllocation;
  m.memory_kind = 3;  // device
  m.ts_ns = ts;
  m.address = address;
  m.bytes = bytes;
  return m;
}

records::MemoryRecord Release(uint32_t device, uint64_t address, uint64_t bytes, int64_t ts) {
  records::MemoryRecord m = Alloc(device, address, bytes, ts);
  m.operation = records::kMemoryOpRelease;
  return m;
}

DecodedRecords Read(const std::vector<uint8_t>& payload) {
  RecordReaderOptions options;
  options.expected_pid = kPid;
  absl::StatusOr<DecodedRecords> records = ReadRecords(payload, options);
  EXPECT_TRUE(records.ok()) << records.status();
  return records.ok() ? *std::move(records) : DecodedRecords{};
}

json ConvertMemory(const std::vector<uint8_t>& payload) {
  DecodedRecords records = Read(payload);
  ChromeTraceMeta meta;
  meta.trace_id = "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b";
  meta.process.set_pid(kPid);
  StringSink sink;
  EXPECT_TRUE(WriteChromeTrace(records, meta, &sink).ok());
  return json::parse(sink.str());
}

// The counter samples of one device's track: (ts µs since the base, bytes).
std::vector<std::pair<double, int64_t>> Track(const json& doc, int device) {
  std::vector<std::pair<double, int64_t>> out;
  const std::string name = "Device memory allocated (GPU " + std::to_string(device) + ")";
  for (const json& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "C" || e.value("name", "") != name) continue;
    EXPECT_EQ(e["pid"], device);
    EXPECT_EQ(e["cat"], "gpu_memory");
    out.emplace_back(e["ts"].get<double>(), e["args"]["bytes"].get<int64_t>());
  }
  return out;
}

std::vector<json> Instants(const json& doc) {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "i" && e.value("cat", "") == "gpu_memory") out.push_back(e);
  }
  return out;
}

TEST(ChromeTraceMemoryTest, CounterTrackPerDeviceStartsAtZeroAtTheWindowStart) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddCaptureInfo({.activities = records::kActivityMemory});
  // Out of time order, as CUPTI's buffers may deliver them.
  b.Add(Alloc(0, 0x2000, 4 * kMiB, kStart + 3'000));
  b.Add(Alloc(0, 0x1000, 2 * kMiB, kStart + 1'000));
  // Frees the 2 MiB above: the allocation's size counts, not the record's.
  b.Add(Release(0, 0x1000, 0, kStart + 5'000));
  // An allocation made before the window: the record's own size.
  b.Add(Release(0, 0x9000, kMiB, kStart + 7'000));
  b.Add(Alloc(1, 0x1000, 8 * kMiB, kStart + 2'000));
  json doc = ConvertMemory(b.Build());

  using Samples = std::vector<std::pair<double, int64_t>>;
  EXPECT_EQ(Track(doc, 0), (Samples{{250000.0, 0},
                                    {250001.0, int64_t{2} * kMiB},
                                    {250003.0, int64_t{6} * kMiB},
                                    {250005.0, int64_t{4} * kMiB},
                                    {250007.0, int64_t{3} * kMiB}}));
  EXPECT_EQ(Track(doc, 1), (Samples{{250000.0, 0}, {250002.0, int64_t{8} * kMiB}}));
  EXPECT_EQ(doc["gpuctl"]["memory_counter_baseline"], "window_start");
  EXPECT_EQ(doc["gpuctl"]["memory_records_skipped"], 0);

  std::vector<json> instants = Instants(doc);
  ASSERT_EQ(instants.size(), 5u);
  // In time order, all devices together.
  const json& release = instants[3];
  EXPECT_EQ(release["name"], "Memory Release");
  EXPECT_EQ(release["pid"], 0);
  EXPECT_EQ(release["s"], "t");
  EXPECT_EQ(release["args"]["bytes"], 2 * kMiB);
  EXPECT_EQ(release["args"]["address"], 0x1000);
  EXPECT_EQ(release["args"]["allocated"], 4 * kMiB);
  EXPECT_EQ(release["args"]["stream"], -1);
  EXPECT_EQ(release["args"]["memory kind"], "Device");
  EXPECT_EQ(release["args"]["async"], false);
}

TEST(ChromeTraceMemoryTest, PoolAllocationsAndPoolRecordsCarryThePool) {
  PayloadBuilder b(kPid, kStart, kEnd);
  records::MemoryRecord m = Alloc(0, 0x7f0040000000, kMiB, kStart + 1'000);
  m.stream_id = 7;
  m.flags = records::kMemoryFlagAsync;
  m.pool_type = 1;
  m.pool_address = 0x7f0040000000;
  m.pool_size = 2 * kMiB;
  m.pool_utilized = kMiB;
  b.Add(m);
  records::MemoryPoolRecord p;
  p.device_id = 0;
  p.operation = records::kPoolOpTrimmed;
  p.pool_type = 1;
  p.ts_ns = kStart + 2'000;
  p.address = 0x7f0040000000;
  p.size = kMiB;
  p.utilized = kMiB;
  p.min_bytes_to_keep = 512 * 1024;
  b.Add(p);
  json doc = ConvertMemory(b.Build());
  std::vector<json> instants = Instants(doc);
  ASSERT_EQ(instants.size(), 2u);
  EXPECT_EQ(instants[0]["name"], "Memory Allocation");
  EXPECT_EQ(instants[0]["args"]["async"], true);
  EXPECT_EQ(instants[0]["args"]["stream"], 7);
  EXPECT_EQ(instants[0]["args"]["pool type"], "local");
  EXPECT_EQ(instants[0]["args"]["pool size"], 2 * kMiB);
  EXPECT_EQ(instants[0]["args"]["pool utilized"], kMiB);
  EXPECT_EQ(instants[1]["name"], "Memory Pool Trimmed");
  EXPECT_EQ(instants[1]["args"]["size"], kMiB);
  EXPECT_EQ(instants[1]["args"]["min bytes to keep"], 512 * 1024);
  // The device's row is named even without kernels or device properties.
  bool named = false;
  for (const json& e : doc["traceEvents"]) {
    named |= e.value("ph", "") == "M" && e.value("name", "") == "process_name" && e["pid"] == 0 &&
             e["args"]["name"] == "GPU 0";
  }
  EXPECT_TRUE(named);
}

TEST(ChromeTraceMemoryTest, RecordsOutOfRangeAreSkippedAndCounted) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddCaptureInfo({.activities = records::kActivityMemory});
  b.Add(Alloc(0, 0x1000, kMiB, kStart + 1'000));
  records::MemoryRecord bad_op = Alloc(0, 0x2000, kMiB, kStart + 2'000);
  bad_op.operation = 0;
  b.Add(bad_op);
  b.Add(Alloc(4096, 0x3000, kMiB, kStart + 3'000));            // no such device
  b.Add(Alloc(0, 0x4000, uint64_t{1} << 41, kStart + 4'000));  // 2 TiB
  b.Add(Alloc(0, 0x5000, 0, kStart + 5'000));                  // allocates nothing
  b.Add(Alloc(0, 0x6000, kMiB, kEnd + 3'600'000'000'000));     // hours past the window
  records::MemoryRecord bad_kind = Alloc(0, 0x7000, kMiB, kStart + 7'000);
  bad_kind.memory_kind = 200;
  b.Add(bad_kind);
  records::MemoryPoolRecord bad_pool;
  bad_pool.operation = 9;
  bad_pool.ts_ns = kStart;
  b.Add(bad_pool);
  DecodedRecords records = Read(b.Build());
  EXPECT_EQ(records.memory_ops.size(), 1u);
  EXPECT_EQ(records.memory_pools.size(), 0u);
  EXPECT_EQ(records.skipped_memory_records, 7u);

  json doc = ConvertMemory(b.Build());
  EXPECT_EQ(doc["gpuctl"]["memory_records_skipped"], 7);
  using Samples = std::vector<std::pair<double, int64_t>>;
  EXPECT_EQ(Track(doc, 0), (Samples{{250000.0, 0}, {250001.0, int64_t{1} * kMiB}}));
}

TEST(ChromeTraceMemoryTest, ATruncatedMemoryRecordIsRefusedLikeAnyKind) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddRawRecord(static_cast<uint16_t>(records::Kind::kMemory), std::vector<uint8_t>(40, 0));
  RecordReaderOptions options;
  options.expected_pid = kPid;
  absl::StatusOr<DecodedRecords> records = ReadRecords(b.Build(), options);
  ASSERT_FALSE(records.ok());
  EXPECT_NE(records.status().message().find("below the minimum of 80 for kind 20"),
            std::string::npos)
      << records.status();
}

TEST(ChromeTraceMemoryTest, NoMemoryRecordsNoMemoryEvents) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddCaptureInfo({});
  json doc = ConvertMemory(b.Build());
  EXPECT_TRUE(Instants(doc).empty());
  EXPECT_TRUE(Track(doc, 0).empty());
  EXPECT_FALSE(doc["gpuctl"].contains("memory_counter_baseline"));
}

}  // namespace
}  // namespace gpuctl::daemon
