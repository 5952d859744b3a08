#include "client_lib/src/cupti/activity_translator.h"

#include <gtest/gtest.h>

#include "client_lib/src/payload_decoder_for_test.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client::cupti {
namespace {

using client::testing::DecodedPayload;
using client::testing::DecodePayload;

DecodedPayload Emit(ActivityTranslator& t, int64_t start, int64_t end) {
  RecordWriter writer;
  t.Emit(writer, start, end);
  std::optional<DecodedPayload> p = DecodePayload(writer.Finish({0, start, end, 1}));
  EXPECT_TRUE(p.has_value());
  return p.value_or(DecodedPayload{});
}

CUpti_ActivityMarker2 Marker(uint32_t id, CUpti_ActivityFlag flag, uint64_t ts, const char* name) {
  CUpti_ActivityMarker2 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = flag;
  m.timestamp = ts;
  m.id = id;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.threadId = 42;
  m.name = name;
  return m;
}

const CUpti_Activity* AsActivity(const void* record) {
  return static_cast<const CUpti_Activity*>(record);
}

TEST(ActivityTranslatorTest, UnknownKindsAreSkipped) {
  ActivityTranslator t;
  t.Reset(1 << 20, 0, nullptr);
  CUpti_ActivityCudaEvent2 event{};
  event.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
  t.Add(AsActivity(&event));
  EXPECT_EQ(t.skipped_unknown(), 1u);
  EXPECT_TRUE(Emit(t, 0, 100).events.empty());
}

TEST(ActivityTranslatorTest, MarkersPairByIdAndOpenOnesEndAtTheWindowEnd) {
  ActivityTranslator t;
  t.Reset(1 << 20, 5, nullptr);
  CUpti_ActivityMarker2 start = Marker(1, CUPTI_ACTIVITY_FLAG_MARKER_START, 10, "a");
  CUpti_ActivityMarker2 open = Marker(2, CUPTI_ACTIVITY_FLAG_MARKER_START, 20, "b");
  CUpti_ActivityMarker2 end = Marker(1, CUPTI_ACTIVITY_FLAG_MARKER_END, 30, nullptr);
  CUpti_ActivityMarker2 orphan = Marker(9, CUPTI_ACTIVITY_FLAG_MARKER_END, 31, nullptr);
  for (const auto* m : {&start, &open, &end, &orphan}) t.Add(AsActivity(m));
  DecodedPayload p = Emit(t, 0, 100);
  ASSERT_EQ(p.events.size(), 2u);
  EXPECT_EQ(p.events[0].name, "a");
  EXPECT_EQ(p.events[0].start_ns, 15);  // clock offset applied
  EXPECT_EQ(p.events[0].end_ns, 35);
  EXPECT_EQ(p.events[0].U32(8), 42u);
  EXPECT_EQ(p.events[1].name, "b");
  EXPECT_EQ(p.events[1].end_ns, 100);
}

TEST(ActivityTranslatorTest, ApiNamesLoseTheirVersionSuffix) {
  ActivityTranslator t;
  int lookups = 0;
  t.Reset(1 << 20, 0, [&](CUpti_CallbackDomain, uint32_t cbid) {
    ++lookups;
    return cbid == 1 ? std::string("cudaStreamGetCaptureInfo_v2_v11030") : std::string();
  });
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  api.cbid = 1;
  api.start = 1;
  api.end = 2;
  t.Add(AsActivity(&api));
  t.Add(AsActivity(&api));
  api.cbid = 2;
  t.Add(AsActivity(&api));
  DecodedPayload p = Emit(t, 0, 100);
  ASSERT_EQ(p.events.size(), 3u);
  EXPECT_EQ(p.events[0].name, "cudaStreamGetCaptureInfo_v2");
  EXPECT_EQ(p.events[2].name, "cbid 2");
  EXPECT_EQ(lookups, 2);
}

TEST(ActivityTranslatorTest, NoiseCallsAreFilteredByCbid) {
  EXPECT_TRUE(ActivityTranslator::IsNoiseCall(CUPTI_CB_DOMAIN_RUNTIME_API,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));
  EXPECT_TRUE(ActivityTranslator::IsNoiseCall(CUPTI_CB_DOMAIN_DRIVER_API,
                                              CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2));
  EXPECT_FALSE(ActivityTranslator::IsNoiseCall(CUPTI_CB_DOMAIN_RUNTIME_API,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  ActivityTranslator t;
  t.Reset(1 << 20, 0, nullptr);
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020;
  t.Add(AsActivity(&api));
  EXPECT_EQ(t.filtered_calls(), 1u);
}

TEST(ActivityTranslatorTest, CapCountsRecordsAndStrings) {
  ActivityTranslator t;
  t.Reset(2 * records::kKernelSize + 8, 0, nullptr);
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = "k";
  k.start = 1;
  k.end = 2;
  for (int i = 0; i < 5; ++i) t.Add(AsActivity(&k));
  EXPECT_EQ(Emit(t, 0, 10).events.size(), 2u);
  EXPECT_EQ(t.dropped_at_cap(), 3u);
}

}  // namespace
}  // namespace gpuctl::client::cupti
