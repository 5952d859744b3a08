// CuptiSource over the in-process fake CUPTI: every record kind, caps,
// clipping, coexistence, failures, finalize and re-arm, range correlation.
#include "client_lib/src/cupti/cupti_source.h"

#include <gtest/gtest.h>

#include "client_lib/src/cupti/fake/fake_cupti_table.h"
#include "client_lib/src/payload_decoder_for_test.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client::cupti {
namespace {

using client::testing::DecodedEvent;
using client::testing::DecodedPayload;
using client::testing::DecodePayload;

// Thread-safe: CUPTI's timestamp callback reads it from any thread.
class SteppingClock final : public Clock {
 public:
  int64_t RealtimeNs() override { return now_.fetch_add(1000); }
  int64_t MonotonicNs() override { return now_.load(); }
  void Advance(int64_t ns) { now_.fetch_add(ns); }

 private:
  std::atomic<int64_t> now_{1'700'000'000'000'000'000};
};

uint16_t K(records::Kind kind) { return static_cast<uint16_t>(kind); }
int64_t Count(const char* what) { return gpuctl_fake_cupti_count(what); }
std::string Kind(CUpti_ActivityKind kind) { return std::to_string(static_cast<int>(kind)); }

class CuptiSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { gpuctl_fake_cupti_reset("basic"); }

  CuptiSource::Deps Deps() {
    CuptiSource::Deps deps;
    deps.clock = &clock_;
    deps.load = [this](std::string* error) -> std::optional<CuptiApi> {
      ++loads_;
      if (!load_error_.empty()) {
        *error = load_error_;
        return std::nullopt;
      }
      return testing::FakeCuptiApi();
    };
    deps.process_has_cuda = [this] { return has_cuda_; };
    return deps;
  }

  CaptureRequest Request(uint32_t activities = records::kDefaultActivities, uint64_t cap = 0) {
    return CaptureRequest{"t", cap, activities, 0};
  }

  // Runs one window of `ns` and returns the decoded payload.
  DecodedPayload Window(CuptiSource& source, CollectStats* stats = nullptr,
                        int64_t ns = 1'000'000) {
    start_ = clock_.RealtimeNs();
    source.Start(start_);
    clock_.Advance(ns);
    end_ = clock_.RealtimeNs();
    source.Stop(end_);
    RecordWriter writer;
    CollectStats s = source.Collect(writer);
    if (stats != nullptr) *stats = s;
    std::optional<DecodedPayload> p =
        DecodePayload(writer.Finish({s.dropped_events, start_, end_, 1}));
    EXPECT_TRUE(p.has_value());
    return p.value_or(DecodedPayload{});
  }

  static std::vector<DecodedEvent> Named(const DecodedPayload& p, records::Kind kind,
                                         const std::string& name) {
    std::vector<DecodedEvent> out;
    for (const DecodedEvent& e : p.OfKind(K(kind))) {
      if (e.name == name) out.push_back(e);
    }
    return out;
  }

  SteppingClock clock_;
  bool has_cuda_ = true;
  std::string load_error_;
  int loads_ = 0;
  int64_t start_ = 0;
  int64_t end_ = 0;
};

TEST_F(CuptiSourceTest, KernelRecordCarriesEveryField) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error)) << error.message;
  DecodedPayload p = Window(source);
  std::vector<DecodedEvent> k = Named(p, records::Kind::kKernel, "fake_kernel_a");
  ASSERT_EQ(k.size(), 1u);
  const DecodedEvent& e = k[0];
  EXPECT_EQ(e.U32(4), 0u);   // device
  EXPECT_EQ(e.U32(8), 1u);   // context
  EXPECT_EQ(e.U32(12), 7u);  // stream
  EXPECT_EQ(e.U32(16), 1u);  // correlation
  EXPECT_GE(e.start_ns, start_);
  EXPECT_LE(e.end_ns, end_);
  EXPECT_LT(e.start_ns, e.end_ns);
  EXPECT_EQ(e.U32(40), 4u);
  EXPECT_EQ(e.U32(44), 2u);
  EXPECT_EQ(e.U32(48), 1u);
  EXPECT_EQ(e.U32(52), 128u);
  EXPECT_EQ(e.U32(56), 1u);
  EXPECT_EQ(e.U32(60), 1u);
  EXPECT_EQ(e.U32(64), 32u);               // registers
  EXPECT_EQ(e.U32(68), 1024u);             // static shared
  EXPECT_EQ(e.U32(72), 2048u);             // dynamic shared
  EXPECT_EQ(e.U32(76), 0u);                // graph id
  EXPECT_EQ(e.U64(80), 0u);                // graph node
  EXPECT_EQ(e.U32(88), 65536u);            // shared memory executed
  EXPECT_EQ(e.U32(92), 16u);               // local memory per thread
  EXPECT_EQ(e.I64(96), e.start_ns - 100);  // queued
  EXPECT_EQ(e.U32(104), 1u);               // cache config executed
  std::vector<DecodedEvent> graph = Named(p, records::Kind::kKernel, "graph_kernel");
  ASSERT_EQ(graph.size(), 1u);
  EXPECT_EQ(graph[0].U32(76), 5u);
  EXPECT_EQ(graph[0].U64(80), 77u);
  EXPECT_EQ(graph[0].U32(12), 13u);
}

TEST_F(CuptiSourceTest, EveryOtherKindIsTranslated) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(
      source.Prepare(Request(records::kDefaultActivities | records::kActivityDriver), &error));
  DecodedPayload p = Window(source);

  std::vector<DecodedEvent> memcpy = p.OfKind(K(records::Kind::kMemcpy));
  ASSERT_EQ(memcpy.size(), 1u);
  EXPECT_EQ(memcpy[0].U32(16), 4u);
  EXPECT_EQ(memcpy[0].raw[20], CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(memcpy[0].raw[21], CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  EXPECT_EQ(memcpy[0].raw[22], CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(memcpy[0].raw[23], records::kMemcpyFlagAsync);
  EXPECT_EQ(memcpy[0].U64(40), 4096u);

  std::vector<DecodedEvent> memset = p.OfKind(K(records::Kind::kMemset));
  ASSERT_EQ(memset.size(), 1u);
  EXPECT_EQ(memset[0].U32(20), 0xabu);
  EXPECT_EQ(memset[0].U64(40), 256u);
  EXPECT_EQ(memset[0].U32(16), 5u);
  EXPECT_EQ(memset[0].U32(12), 7u);

  // cudaGetLastError and cuCtxGetCurrent are noise: filtered.
  std::vector<DecodedEvent> api = p.OfKind(K(records::Kind::kApiCall));
  ASSERT_EQ(api.size(), 2u);
  std::vector<DecodedEvent> launch = Named(p, records::Kind::kApiCall, "cudaLaunchKernel");
  ASSERT_EQ(launch.size(), 1u);
  EXPECT_EQ(launch[0].U32(4), records::kApiDomainRuntime);
  EXPECT_EQ(launch[0].U32(8), CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  EXPECT_EQ(launch[0].U32(12), 1u);  // correlation: links to fake_kernel_a
  EXPECT_EQ(launch[0].U32(16), static_cast<uint32_t>(getpid()));
  EXPECT_NE(launch[0].U32(20), 0u);
  std::vector<DecodedEvent> driver = Named(p, records::Kind::kApiCall, "cuLaunchKernel");
  ASSERT_EQ(driver.size(), 1u);
  EXPECT_EQ(driver[0].U32(4), records::kApiDomainDriver);

  std::vector<DecodedEvent> sync = p.OfKind(K(records::Kind::kSync));
  ASSERT_EQ(sync.size(), 1u);
  EXPECT_EQ(sync[0].U32(4), CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
  EXPECT_EQ(sync[0].U32(12), 7u);
  EXPECT_EQ(sync[0].U32(16), records::kInvalidId);
  EXPECT_EQ(sync[0].U32(20), 6u);

  std::vector<DecodedEvent> range = Named(p, records::Kind::kMarker, "nvtx_range");
  ASSERT_EQ(range.size(), 1u);
  EXPECT_EQ(range[0].domain, "fake_domain");
  EXPECT_LT(range[0].start_ns, range[0].end_ns);
  EXPECT_EQ(range[0].U32(12), 1u);
  EXPECT_EQ(range[0].U32(40), 0u);
  std::vector<DecodedEvent> mark = Named(p, records::Kind::kMarker, "nvtx_mark");
  ASSERT_EQ(mark.size(), 1u);
  EXPECT_EQ(mark[0].start_ns, mark[0].end_ns);
  EXPECT_EQ(mark[0].U32(40), records::kMarkerFlagInstant);

  std::vector<DecodedEvent> overhead = p.OfKind(K(records::Kind::kOverhead));
  ASSERT_EQ(overhead.size(), 1u);
  EXPECT_EQ(overhead[0].U32(4), CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH);
  EXPECT_EQ(overhead[0].U32(8), CUPTI_ACTIVITY_OBJECT_THREAD);
  EXPECT_EQ(overhead[0].U32(12), static_cast<uint32_t>(getpid()));

  std::vector<DecodedEvent> ext = p.OfKind(K(records::Kind::kExternalCorrelation));
  ASSERT_EQ(ext.size(), 1u);
  EXPECT_EQ(ext[0].U32(4), records::kExternalKindGpuctlRange);
  EXPECT_EQ(ext[0].U32(8), 1u);
  EXPECT_EQ(ext[0].U64(16), 0xabcu);

  std::vector<DecodedEvent> device = p.OfKind(K(records::Kind::kDeviceInfo));
  ASSERT_EQ(device.size(), 1u);
  EXPECT_EQ(device[0].name, "Fake GPU 0");
  EXPECT_EQ(device[0].U32(12), 9u);
  EXPECT_EQ(device[0].U32(20), 132u);
  EXPECT_EQ(device[0].U32(24), 2048u);  // 64 warps x 32
  EXPECT_EQ(device[0].U32(48), 32u);
  EXPECT_EQ(device[0].U32(52), 32u);
  EXPECT_EQ(device[0].U64(56), 80ull << 30);

  std::vector<DecodedEvent> info = p.OfKind(K(records::Kind::kCaptureInfo));
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].U32(4), records::kCaptureFlagCuptiActive);
  EXPECT_EQ(info[0].U32(8), records::kDefaultActivities | records::kActivityDriver);
  EXPECT_EQ(info[0].U32(12), static_cast<uint32_t>(CUPTI_API_VERSION));
  EXPECT_EQ(info[0].domain, "fake");  // cupti_path
}

TEST_F(CuptiSourceTest, SetupOrderAndKindsFollowTheRules) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  EXPECT_EQ(Count("subscribe"), 1);
  EXPECT_EQ(Count("register_timestamp"), 1);
  EXPECT_EQ(
      Count(("attr:" + std::to_string(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER)).c_str()), 1);
  EXPECT_EQ(Count(("attr:" + std::to_string(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT)).c_str()),
            static_cast<int64_t>(CuptiSource::kDeviceBufferPoolLimit));
  EXPECT_EQ(Count(("attr:" + std::to_string(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE)).c_str()),
            static_cast<int64_t>(CuptiSource::kDeviceBufferBytes));
  // Nothing is enabled before the window opens.
  EXPECT_EQ(Count(("enable:" + Kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)).c_str()), 0);
  source.Start(clock_.RealtimeNs());
  EXPECT_EQ(Count(("enabled:" + Kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)).c_str()), 1);
  EXPECT_EQ(Count(("enable:" + Kind(CUPTI_ACTIVITY_KIND_KERNEL)).c_str()), 0);
  EXPECT_EQ(Count(("enable:" + Kind(CUPTI_ACTIVITY_KIND_DRIVER)).c_str()), 0);
  EXPECT_EQ(Count(("enabled:" + Kind(CUPTI_ACTIVITY_KIND_MEMCPY2)).c_str()), 1);
  EXPECT_EQ(Count("enable_without_timestamp"), 0);
  source.Stop(clock_.RealtimeNs());
  EXPECT_EQ(Count(("enabled:" + Kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)).c_str()), 0);
  EXPECT_EQ(Count("flush"), 1);
}

TEST_F(CuptiSourceTest, OnlyTheAskedKindsAreRecorded) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(records::kActivityKernel), &error));
  DecodedPayload p = Window(source);
  EXPECT_FALSE(p.OfKind(K(records::Kind::kKernel)).empty());
  EXPECT_TRUE(p.OfKind(K(records::Kind::kMemcpy)).empty());
  EXPECT_TRUE(p.OfKind(K(records::Kind::kApiCall)).empty());
  EXPECT_EQ(Count(("enable:" + Kind(CUPTI_ACTIVITY_KIND_RUNTIME)).c_str()), 0);
}

TEST_F(CuptiSourceTest, RecordsOutsideTheWindowAreClipped) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  DecodedPayload p = Window(source);
  EXPECT_TRUE(Named(p, records::Kind::kKernel, "early_kernel").empty());
  EXPECT_TRUE(Named(p, records::Kind::kKernel, "late_kernel").empty());
  for (const DecodedEvent& e : p.events) {
    if (e.start_ns == 0 && e.end_ns == 0) continue;
    EXPECT_LE(e.start_ns, end_);
    EXPECT_GE(e.end_ns, start_);
  }
}

TEST_F(CuptiSourceTest, MultiDeviceAndPeerCopies) {
  gpuctl_fake_cupti_reset("multi_device");
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  DecodedPayload p = Window(source);
  EXPECT_EQ(p.OfKind(K(records::Kind::kDeviceInfo)).size(), 2u);
  std::vector<DecodedEvent> b = Named(p, records::Kind::kKernel, "fake_kernel_b");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].U32(4), 1u);
  EXPECT_EQ(b[0].U32(12), 21u);
  std::vector<DecodedEvent> copies = p.OfKind(K(records::Kind::kMemcpy));
  ASSERT_EQ(copies.size(), 2u);
  const DecodedEvent& peer = (copies[0].raw[23] & records::kMemcpyFlagPeer) ? copies[0] : copies[1];
  EXPECT_EQ(peer.raw[23] & records::kMemcpyFlagPeer, records::kMemcpyFlagPeer);
  EXPECT_EQ(peer.raw[20], CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
  EXPECT_EQ(peer.U32(48), 0u);  // src device
  EXPECT_EQ(peer.U32(52), 1u);  // dst device
  EXPECT_EQ(peer.U32(56), 1u);  // src context
  EXPECT_EQ(peer.U32(60), 2u);  // dst context
  EXPECT_EQ(peer.U64(40), 1u << 20);
}

TEST_F(CuptiSourceTest, FloodIsDroppedAtTheCapAndCounted) {
  gpuctl_fake_cupti_reset("flood");
  CuptiSource source(Deps());
  PrepareError error;
  // Room for the buffers in flight but not for 20000 kernels.
  CaptureRequest request = Request(records::kActivityKernel, 1 << 20);
  request.activity_buffer_bytes = 64 << 10;
  ASSERT_TRUE(source.Prepare(request, &error));
  CollectStats stats;
  DecodedPayload p = Window(source, &stats);
  const size_t kept = Named(p, records::Kind::kKernel, "flood_kernel").size();
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, 20000u);
  std::vector<DecodedEvent> info = p.OfKind(K(records::Kind::kCaptureInfo));
  ASSERT_EQ(info.size(), 1u);
  const uint64_t by_cupti = info[0].U64(16);
  const uint64_t at_cap = info[0].U64(24);
  EXPECT_GE(by_cupti, 7u);
  EXPECT_GT(at_cap, 0u);
  EXPECT_EQ(stats.dropped_events, by_cupti + at_cap);
  EXPECT_EQ(stats.cupti_dropped, by_cupti);
  // Every generated flood kernel is either kept or counted.
  EXPECT_EQ(kept + by_cupti - 7 + at_cap, 20000u);
  EXPECT_LE(p.events.size() * 112, (1u << 20) + 4096u);
}

TEST_F(CuptiSourceTest, AnotherSubscriberMeansBusyAndNothingIsReplaced) {
  gpuctl_fake_cupti_reset("subscriber_conflict");
  CuptiSource source(Deps());
  PrepareError error;
  EXPECT_FALSE(source.Prepare(Request(), &error));
  EXPECT_EQ(error.status, wire::CaptureStatus::kBusy);
  EXPECT_NE(error.message.find("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), std::string::npos)
      << error.message;
  EXPECT_EQ(Count("register_callbacks"), 0);
  EXPECT_EQ(Count("register_timestamp"), 0);
  source.Abort();
  EXPECT_EQ(Count("unsubscribe"), 0);
  EXPECT_EQ(Count("finalize"), 0);
}

TEST_F(CuptiSourceTest, MissingCuptiIsUnavailableWithTheTriedPaths) {
  load_error_ = "CUPTI not found; tried:\n  /usr/local/cuda/lib64/libcupti.so.13: not found";
  CuptiSource source(Deps());
  PrepareError error;
  EXPECT_FALSE(source.Prepare(Request(), &error));
  EXPECT_EQ(error.status, wire::CaptureStatus::kUnavailable);
  EXPECT_NE(error.message.find("/usr/local/cuda/lib64/libcupti.so.13"), std::string::npos);
  // The next capture tries again.
  load_error_.clear();
  EXPECT_TRUE(source.Prepare(Request(), &error));
  EXPECT_EQ(loads_, 2);
}

TEST_F(CuptiSourceTest, FailureMidWindowKeepsWhatWasCollected) {
  gpuctl_fake_cupti_reset("fail_mid_window");
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  CollectStats stats;
  DecodedPayload p = Window(source, &stats);
  EXPECT_FALSE(stats.host_only);
  EXPECT_NE(stats.message.find("cuptiActivityFlushAll: CUPTI_ERROR_UNKNOWN"), std::string::npos)
      << stats.message;
  std::vector<DecodedEvent> info = p.OfKind(K(records::Kind::kCaptureInfo));
  ASSERT_EQ(info.size(), 1u);
  EXPECT_NE(info[0].U32(4) & records::kCaptureFlagCuptiFailed, 0u);
  EXPECT_EQ(info[0].name, stats.message);
  EXPECT_GT(p.events.size(), 1u);  // the first half of the records came through
  // The source is released and can run the next window.
  EXPECT_TRUE(source.finalize_pending());
}

TEST_F(CuptiSourceTest, NoDeviceGivesAHostOnlyCapture) {
  gpuctl_fake_cupti_reset("no_device");
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  CollectStats stats;
  DecodedPayload p = Window(source, &stats);
  EXPECT_TRUE(stats.host_only);
  EXPECT_NE(stats.message.find("CUPTI_ERROR_NOT_INITIALIZED"), std::string::npos) << stats.message;
  std::vector<DecodedEvent> info = p.OfKind(K(records::Kind::kCaptureInfo));
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].U32(4), records::kCaptureFlagHostOnly);
  EXPECT_EQ(p.events.size(), 1u);
  EXPECT_EQ(Count("flush"), 0);
}

TEST_F(CuptiSourceTest, ProcessWithoutCudaLoadsNothing) {
  has_cuda_ = false;
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  CollectStats stats;
  DecodedPayload p = Window(source, &stats);
  EXPECT_EQ(loads_, 0);
  EXPECT_EQ(Count("subscribe"), 0);
  EXPECT_TRUE(stats.host_only);
  EXPECT_NE(stats.message.find("no CUDA library"), std::string::npos);
  ASSERT_EQ(p.OfKind(K(records::Kind::kCaptureInfo)).size(), 1u);
}

TEST_F(CuptiSourceTest, NoActivitiesMeansNoCupti) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(0), &error));
  DecodedPayload p = Window(source);
  EXPECT_TRUE(p.events.empty());
  EXPECT_EQ(loads_, 0);
}

TEST_F(CuptiSourceTest, FinalizeRunsAtTheNextApiExitAndTheNextWindowReArms) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  DecodedPayload first = Window(source);
  EXPECT_FALSE(first.OfKind(K(records::Kind::kKernel)).empty());
  // After the flush, CUPTI is released at the next API exit, not before.
  EXPECT_TRUE(source.finalize_pending());
  EXPECT_EQ(Count("finalize"), 0);
  EXPECT_EQ(Count("domain:1"), 1);
  EXPECT_EQ(gpuctl_fake_cupti_api_exit(), 1);
  EXPECT_EQ(Count("finalize"), 1);
  EXPECT_EQ(source.finalizations(), 1u);
  EXPECT_FALSE(source.finalize_pending());
  EXPECT_EQ(gpuctl_fake_cupti_api_exit(), 0);  // nothing subscribed any more

  ASSERT_TRUE(source.Prepare(Request(), &error)) << error.message;
  EXPECT_EQ(Count("subscribe"), 2);
  EXPECT_EQ(Count("register_callbacks"), 2);
  EXPECT_EQ(Count("register_timestamp"), 2);
  DecodedPayload second = Window(source);
  EXPECT_EQ(Count("enable_without_timestamp"), 0);
  EXPECT_EQ(Named(second, records::Kind::kKernel, "fake_kernel_a").size(), 1u);
  EXPECT_EQ(gpuctl_fake_cupti_api_exit(), 1);
  EXPECT_EQ(Count("finalize"), 2);
}

TEST_F(CuptiSourceTest, NextWindowBeforeAnyApiCallUnsubscribesInstead) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  Window(source);
  ASSERT_TRUE(source.finalize_pending());
  ASSERT_TRUE(source.Prepare(Request(), &error)) << error.message;
  EXPECT_EQ(Count("unsubscribe"), 1);
  EXPECT_EQ(Count("finalize"), 0);
  EXPECT_EQ(Count("subscribe"), 2);
  DecodedPayload p = Window(source);
  EXPECT_FALSE(p.OfKind(K(records::Kind::kKernel)).empty());
}

TEST_F(CuptiSourceTest, AbortReleasesCupti) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  source.Start(clock_.RealtimeNs());
  source.Abort();
  EXPECT_EQ(Count(("enabled:" + Kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)).c_str()), 0);
  EXPECT_TRUE(source.finalize_pending());
  gpuctl_fake_cupti_api_exit();
  EXPECT_EQ(Count("finalize"), 1);
}

TEST_F(CuptiSourceTest, GpuctlRangesBecomeExternalCorrelationIds) {
  AnnotationState state;
  HostSource host(&state, &clock_);
  CuptiSource source(Deps());
  host.set_range_listener(&source);
  PrepareError error;
  ASSERT_TRUE(host.Prepare(Request(), &error));
  ASSERT_TRUE(source.Prepare(Request(), &error));
  // Outside the window nothing is pushed.
  EXPECT_FALSE(source.OnRangePush(1));
  start_ = clock_.RealtimeNs();
  host.Start(start_);
  source.Start(start_);
  host.Push("forward");
  gpuctl_fake_cupti_launch_kernel("forward_kernel");
  host.Push("inner");
  const uint64_t inner_id = gpuctl_fake_cupti_last_external_id();
  host.Pop();
  host.Pop();
  EXPECT_EQ(Count("ext_push"), 2);
  EXPECT_EQ(Count("ext_pop"), 2);
  end_ = clock_.RealtimeNs();
  host.Stop(end_);
  source.Stop(end_);
  RecordWriter writer;
  host.Collect(writer);
  source.Collect(writer);
  std::optional<DecodedPayload> p = DecodePayload(writer.Finish({0, start_, end_, 1}));
  ASSERT_TRUE(p.has_value());
  std::vector<DecodedEvent> forward = p->Ranges("forward");
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_NE(p->Ranges("inner")[0].range_id, forward[0].range_id);
  EXPECT_EQ(p->Ranges("inner")[0].range_id, inner_id);
  std::vector<DecodedEvent> kernel = Named(*p, records::Kind::kKernel, "forward_kernel");
  ASSERT_EQ(kernel.size(), 1u);
  bool linked = false;
  for (const DecodedEvent& e : p->OfKind(K(records::Kind::kExternalCorrelation))) {
    if (e.U32(8) == kernel[0].U32(16)) {
      EXPECT_EQ(e.U64(16), forward[0].range_id);
      linked = true;
    }
  }
  EXPECT_TRUE(linked);
}

}  // namespace
}  // namespace gpuctl::client::cupti
