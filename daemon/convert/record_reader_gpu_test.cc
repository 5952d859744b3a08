// The GPU record kinds (records.h, minor 1) through the reader.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/convert/record_reader.h"
#include "daemon/convert/testing/payload_builder.h"
#include "gmock/gmock.h"
#include "gpuctl/v1/records.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::testing::PayloadBuilder;
using ::gpuctl::testing::Store16;
using ::gpuctl::testing::Store32;
using ::gpuctl::testing::Store64;
using ::testing::HasSubstr;

constexpr int32_t kPid = 4242;
constexpr int64_t kStart = 1704067200'000'000'000;
constexpr int64_t kEnd = kStart + 2'000'000'000;
constexpr size_t kFirstRecord = records::kHeaderSize;

RecordReaderOptions Options() {
  RecordReaderOptions o;
  o.expected_pid = kPid;
  return o;
}

absl::Status ReadStatus(const std::vector<uint8_t>& p) {
  return ReadRecords(p, Options()).status();
}

TEST(RecordReaderGpuTest, DecodesEveryGpuKind) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddKernel({.device = 1,
               .context = 2,
               .stream = 13,
               .correlation = 40,
               .name = "gemm",
               .start_ns = kStart + 100,
               .end_ns = kStart + 900,
               .grid = {4, 2, 1},
               .block = {128, 2, 1},
               .registers_per_thread = 64,
               .static_shared_memory = 1024,
               .dynamic_shared_memory = 2048,
               .graph_id = 5,
               .graph_node_id = 1ull << 40,
               .shared_memory_executed = 65536});
  b.AddMemcpy({.device = 1,
               .stream = 14,
               .correlation = 41,
               .copy_kind = 10,
               .flags = 3,
               .start_ns = kStart + 10,
               .end_ns = kStart + 20,
               .bytes = 1ull << 33,
               .src_device = 1,
               .dst_device = 2,
               .src_context = 2,
               .dst_context = 3});
  b.AddMemset({.correlation = 42,
               .value = 7,
               .start_ns = kStart,
               .end_ns = kStart + 1,
               .bytes = 64,
               .memory_kind = 3,
               .flags = 1});
  b.AddApiCall({.domain = 2,
                .cbid = 307,
                .correlation = 40,
                .pid = kPid,
                .tid = 99,
                .start_ns = kStart + 50,
                .end_ns = kStart + 60,
                .name = "cuLaunchKernel"});
  b.AddSync({.type = 4,
             .context = 2,
             .stream = records::kInvalidId,
             .correlation = 43,
             .start_ns = kStart + 1000,
             .end_ns = kStart + 2000});
  b.AddMarker({.pid = kPid,
               .tid = 99,
               .marker_id = 8,
               .start_ns = kStart + 5,
               .end_ns = kStart + 5,
               .name = "tick",
               .domain = "app",
               .flags = 1});
  b.AddOverhead({.object_id = {kPid, 99, 0}, .start_ns = kStart + 3, .end_ns = kStart + 4});
  b.AddExternalCorrelation(records::kExternalKindGpuctlRange, 40, 77);
  b.AddDeviceInfo({.device = 1});
  b.AddCaptureInfo({.flags = 1,
                    .activities = 9,
                    .dropped_by_cupti = 3,
                    .dropped_at_cap = 4,
                    .message = "no CUDA library loaded"});
  // Decoded strings point into the payload: keep it alive.
  const std::vector<uint8_t> payload = b.Build();
  auto r = ReadRecords(payload, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->unknown_records, 0u);
  ASSERT_EQ(r->kernels.size(), 1u);
  const KernelRecord& k = r->kernels[0];
  EXPECT_EQ(k.device_id, 1u);
  EXPECT_EQ(k.stream_id, 13u);
  EXPECT_EQ(r->strings[k.name], "gemm");
  EXPECT_EQ(k.end_ns - k.start_ns, 800);
  EXPECT_EQ(k.grid[1], 2);
  EXPECT_EQ(k.block[0], 128);
  EXPECT_EQ(k.registers_per_thread, 64u);
  EXPECT_EQ(k.dynamic_shared_memory, 2048u);
  EXPECT_EQ(k.graph_node_id, 1ull << 40);
  EXPECT_EQ(k.shared_memory_executed, 65536u);
  ASSERT_EQ(r->memcpys.size(), 1u);
  EXPECT_EQ(r->memcpys[0].copy_kind, 10);
  EXPECT_EQ(r->memcpys[0].flags, 3);
  EXPECT_EQ(r->memcpys[0].bytes, 1ull << 33);
  EXPECT_EQ(r->memcpys[0].dst_context, 3u);
  ASSERT_EQ(r->memsets.size(), 1u);
  EXPECT_EQ(r->memsets[0].value, 7u);
  EXPECT_EQ(r->memsets[0].flags, 1);
  ASSERT_EQ(r->api_calls.size(), 1u);
  EXPECT_EQ(r->api_calls[0].domain, records::kApiDomainDriver);
  EXPECT_EQ(r->strings[r->api_calls[0].name], "cuLaunchKernel");
  ASSERT_EQ(r->syncs.size(), 1u);
  EXPECT_EQ(r->syncs[0].stream_id, records::kInvalidId);
  ASSERT_EQ(r->markers.size(), 1u);
  EXPECT_EQ(r->strings[r->markers[0].domain], "app");
  ASSERT_EQ(r->overheads.size(), 1u);
  EXPECT_EQ(r->overheads[0].object_id[1], 99u);
  ASSERT_EQ(r->external_correlations.size(), 1u);
  EXPECT_EQ(r->external_correlations[0].external_id, 77u);
  ASSERT_EQ(r->device_infos.size(), 1u);
  EXPECT_EQ(r->device_infos[0].sm_count, 132u);
  EXPECT_EQ(r->strings[r->device_infos[0].name], "NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(r->capture_info.has_value());
  EXPECT_EQ(r->capture_info->activities, 9u);
  EXPECT_EQ(r->capture_info->dropped_by_cupti, 3u);
  EXPECT_EQ(r->strings[r->capture_info->message], "no CUDA library loaded");
}

TEST(RecordReaderGpuTest, AcceptsAnyMinorAndTrailingFields) {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.set_version(1, 0);
  std::vector<uint8_t> body(records::kExternalCorrelationSize - 4 + 8, 0);
  Store32(&body, 0, records::kExternalKindGpuctlRange);
  Store32(&body, 4, 5);
  Store64(&body, 12, 6);
  b.AddRawRecord(static_cast<uint16_t>(records::Kind::kExternalCorrelation), body);
  const std::vector<uint8_t> payload = b.Build();
  auto r = ReadRecords(payload, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->external_correlations.size(), 1u);
  EXPECT_EQ(r->external_correlations[0].external_id, 6u);
  b.set_version(1, 9);
  EXPECT_TRUE(ReadStatus(b.Build()).ok());
}

// A payload with one kernel first; returns it built.
std::vector<uint8_t> OneKernel() {
  PayloadBuilder b(kPid, kStart, kEnd);
  b.AddKernel({.start_ns = kStart + 10, .end_ns = kStart + 20});
  return b.Build();
}

TEST(RecordReaderGpuTest, RejectsBadKernels) {
  std::vector<uint8_t> p = OneKernel();
  ASSERT_TRUE(ReadStatus(p).ok());
  auto bad = p;
  Store16(&bad, kFirstRecord + 2, records::kKernelSize - 4);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("size 108 is below the minimum of 112"));
  bad = p;
  Store32(&bad, kFirstRecord + 20, 1);
  EXPECT_EQ(ReadStatus(bad).message(), "record 0: string index 1 >= string count 1");
  bad = p;
  Store64(&bad, kFirstRecord + 32, static_cast<uint64_t>(kStart + 9));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("record 0: kernel ends at"));
  bad = p;
  Store64(&bad, kFirstRecord + 24, static_cast<uint64_t>(kStart - 6'000'000'000));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("record 0: kernel start"));
  bad = p;
  Store64(&bad, kFirstRecord + 32, static_cast<uint64_t>(kEnd + 6'000'000'000));
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("record 0: kernel end"));
  bad = p;
  Store32(&bad, kFirstRecord + 44, 0);
  EXPECT_EQ(ReadStatus(bad).message(), "record 0: kernel grid y = 0 is outside [1, 65535]");
  bad = p;
  Store32(&bad, kFirstRecord + 40, 0x80000000u);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("kernel grid x = -2147483648"));
  bad = p;
  Store32(&bad, kFirstRecord + 60, 65536);
  EXPECT_THAT(ReadStatus(bad).message(), HasSubstr("kernel block z = 65536"));
}

TEST(RecordReaderGpuTest, RejectsBadIntervalsOfEveryTimedKind) {
  auto reversed = [](auto add) {
    PayloadBuilder b(kPid, kStart, kEnd);
    add(b);
    return ReadStatus(b.Build());
  };
  const int64_t s = kStart + 20, e = kStart + 10;
  EXPECT_THAT(
      reversed([&](PayloadBuilder& b) { b.AddMemcpy({.start_ns = s, .end_ns = e}); }).message(),
      HasSubstr("memcpy ends at"));
  EXPECT_THAT(
      reversed([&](PayloadBuilder& b) { b.AddMemset({.start_ns = s, .end_ns = e}); }).message(),
      HasSubstr("memset ends at"));
  EXPECT_THAT(
      reversed([&](PayloadBuilder& b) { b.AddApiCall({.start_ns = s, .end_ns = e}); }).message(),
      HasSubstr("API call ends at"));
  EXPECT_THAT(
      reversed([&](PayloadBuilder& b) { b.AddSync({.start_ns = s, .end_ns = e}); }).message(),
      HasSubstr("synchronization ends at"));
  EXPECT_THAT(
      reversed([&](PayloadBuilder& b) { b.AddMarker({.start_ns = s, .end_ns = e}); }).message(),
      HasSubstr("marker ends at"));
  EXPECT_THAT(
      reversed([&](PayloadBuilder& b) { b.AddOverhead({.start_ns = s, .end_ns = e}); }).message(),
      HasSubstr("overhead ends at"));
  EXPECT_THAT(reversed([&](PayloadBuilder& b) {
                b.AddSync({.start_ns = kEnd + 6'000'000'000, .end_ns = kEnd + 6'000'000'000});
              }).message(),
              HasSubstr("synchronization start"));
}

TEST(RecordReaderGpuTest, RejectsBadReferencesAndDuplicates) {
  PayloadBuilder api(kPid, kStart, kEnd);
  api.AddApiCall({.domain = 3, .start_ns = kStart, .end_ns = kStart});
  EXPECT_THAT(ReadStatus(api.Build()).message(),
              HasSubstr("API call domain 3 is neither runtime (1) nor driver (2)"));

  PayloadBuilder marker(kPid, kStart, kEnd);
  marker.AddMarker({.start_ns = kStart, .end_ns = kStart});
  std::vector<uint8_t> p = marker.Build();
  Store32(&p, kFirstRecord + 36, 2);  // domain: two strings were interned
  EXPECT_EQ(ReadStatus(p).message(), "record 0: string index 2 >= string count 2");

  PayloadBuilder devices(kPid, kStart, kEnd);
  devices.AddDeviceInfo({.device = 3});
  devices.AddDeviceInfo({.device = 4});
  EXPECT_TRUE(ReadStatus(devices.Build()).ok());
  devices.AddDeviceInfo({.device = 3});
  EXPECT_EQ(ReadStatus(devices.Build()).message(), "record 2: device 3 is described twice");

  PayloadBuilder info(kPid, kStart, kEnd);
  info.AddCaptureInfo({});
  EXPECT_TRUE(ReadStatus(info.Build()).ok());
  info.AddCaptureInfo({});
  EXPECT_EQ(ReadStatus(info.Build()).message(), "record 1: a second capture info record");

  PayloadBuilder path(kPid, kStart, kEnd);
  path.AddCaptureInfo({});
  p = path.Build();
  Store32(&p, kFirstRecord + 36, 9);
  EXPECT_EQ(ReadStatus(p).message(), "record 0: string index 9 >= string count 2");
}

TEST(RecordReaderGpuTest, RejectsTruncatedGpuRecords) {
  const std::pair<records::Kind, uint16_t> kinds[] = {
      {records::Kind::kMemcpy, records::kMemcpySize},
      {records::Kind::kMemset, records::kMemsetSize},
      {records::Kind::kApiCall, records::kApiCallSize},
      {records::Kind::kSync, records::kSyncSize},
      {records::Kind::kMarker, records::kMarkerSize},
      {records::Kind::kOverhead, records::kOverheadSize},
      {records::Kind::kExternalCorrelation, records::kExternalCorrelationSize},
      {records::Kind::kDeviceInfo, records::kDeviceInfoSize},
      {records::Kind::kCaptureInfo, records::kCaptureInfoSize}};
  for (const auto& [kind, size] : kinds) {
    PayloadBuilder b(kPid, kStart, kEnd);
    b.AddRawRecord(static_cast<uint16_t>(kind), std::vector<uint8_t>(size - 8, 0));
    EXPECT_THAT(ReadStatus(b.Build()).message(),
                HasSubstr(absl::StrCat("size ", size - 4, " is below the minimum of ", size)))
        << static_cast<int>(kind);
  }
}

}  // namespace
}  // namespace gpuctl::daemon
