// CuptiSource over the in-process fake CUPTI: every record kind, caps,
// clipping, coexistence, failures, finalize and re-arm, range correlation.
#include "client_lib/src/cupti/cupti_source.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_lib/src/cupti/fake/fake_cupti_table.h"
#include "client_lib/src/payload_decoder_for_test.h"
#include "client_lib/src/runtime.h"
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
    deps.probe_devices = [this](bool may_initialize) {
      probes_.push_back(may_initialize);
      return may_initialize ? probe_after_cupti_ : probe_;
    };
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
  // What the CUDA driver says before CUPTI is loaded (may not initialize)
  // and after cuptiSubscribe failed (may initialize).
  DeviceProbe probe_{DeviceProbe::State::kNotInitialized, 0,
                     "cuDeviceGetCount: CUDA_ERROR_NOT_INITIALIZED (3)"};
  DeviceProbe probe_after_cupti_{DeviceProbe::State::kUsable, 1, "cuDeviceGetCount: 1 device"};
  std::vector<bool> probes_;
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

TEST_F(CuptiSourceTest, DeviceMemoryIsOffByDefault) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  DecodedPayload p = Window(source);
  EXPECT_FALSE(p.OfKind(K(records::Kind::kKernel)).empty());
  EXPECT_TRUE(p.OfKind(K(records::Kind::kMemory)).empty());
  EXPECT_TRUE(p.OfKind(K(records::Kind::kMemoryPool)).empty());
  EXPECT_EQ(Count(("enable:" + Kind(CUPTI_ACTIVITY_KIND_MEMORY2)).c_str()), 0);
  EXPECT_EQ(Count(("enable:" + Kind(CUPTI_ACTIVITY_KIND_MEMORY_POOL)).c_str()), 0);
}

TEST_F(CuptiSourceTest, DeviceMemoryRecordsWhenAsked) {
  using records::MemoryRecord;
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(records::kActivityMemory), &error));
  DecodedPayload p = Window(source);
  EXPECT_EQ(Count(("enable:" + Kind(CUPTI_ACTIVITY_KIND_MEMORY2)).c_str()), 1);
  EXPECT_EQ(Count(("enable:" + Kind(CUPTI_ACTIVITY_KIND_MEMORY_POOL)).c_str()), 1);
  EXPECT_TRUE(p.OfKind(K(records::Kind::kKernel)).empty());
  std::vector<DecodedEvent> ops = p.OfKind(K(records::Kind::kMemory));
  // The fake's 64 MiB allocation before the window is clipped.
  ASSERT_EQ(ops.size(), 17u);
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  const auto at = [](const char* field) {
    return static_cast<size_t>(records::OffsetOf<MemoryRecord>(field));
  };
  int64_t net = 0;
  for (const DecodedEvent& e : ops) {
    EXPECT_GE(e.start_ns, start_);
    EXPECT_LE(e.start_ns, end_);
    const auto bytes = static_cast<int64_t>(e.U64(at("bytes")));
    net += e.raw[at("operation")] == records::kMemoryOpAllocation ? bytes : -bytes;
  }
  EXPECT_EQ(net, static_cast<int64_t>(18 * kMiB));
  // The stream-ordered allocation from the pool keeps its stream and pool.
  const DecodedEvent& async = ops[0];
  EXPECT_EQ(async.raw[at("operation")], records::kMemoryOpAllocation);
  EXPECT_EQ(async.raw[at("flags")], records::kMemoryFlagAsync);
  EXPECT_EQ(async.raw[at("memory_kind")], CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(async.raw[at("pool_type")], CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL);
  EXPECT_EQ(async.U32(at("stream_id")), 7u);
  EXPECT_EQ(async.U64(at("bytes")), kMiB);
  EXPECT_EQ(async.U64(at("pool_size")), 2 * kMiB);
  EXPECT_EQ(async.U64(at("pool_address")), 0x7f0040000000u);
  const DecodedEvent& sync = ops[1];
  EXPECT_EQ(sync.raw[at("flags")], 0);
  EXPECT_EQ(sync.raw[at("pool_type")], 0);
  EXPECT_EQ(sync.U32(at("stream_id")), records::kInvalidId);
  EXPECT_EQ(sync.U64(at("bytes")), 4 * kMiB);

  std::vector<DecodedEvent> pools = p.OfKind(K(records::Kind::kMemoryPool));
  ASSERT_EQ(pools.size(), 2u);
  using records::MemoryPoolRecord;
  const auto pool_at = [](const char* field) {
    return static_cast<size_t>(records::OffsetOf<MemoryPoolRecord>(field));
  };
  EXPECT_EQ(pools[0].raw[pool_at("operation")], records::kPoolOpCreated);
  EXPECT_EQ(pools[0].U64(pool_at("size")), 2 * kMiB);
  EXPECT_EQ(pools[1].raw[pool_at("operation")], records::kPoolOpTrimmed);
  EXPECT_EQ(pools[1].U64(pool_at("address")), 0x7f0040000000u);
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
  EXPECT_EQ(stats.message, "host-only trace: no usable CUDA device (CUPTI_ERROR_NOT_INITIALIZED)");
  std::vector<DecodedEvent> info = p.OfKind(K(records::Kind::kCaptureInfo));
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].U32(4), records::kCaptureFlagHostOnly);
  // The payload carries the bare reason (the daemon adds "host-only trace").
  EXPECT_EQ(info[0].name, "no usable CUDA device (CUPTI_ERROR_NOT_INITIALIZED)");
  EXPECT_EQ(p.events.size(), 1u);
  EXPECT_EQ(Count("flush"), 0);
}

// A window of `host` and `source` together, with one range pushed in it.
DecodedPayload HostAndGpuWindow(HostSource& host, CuptiSource& source, Clock& clock,
                                CollectStats* stats) {
  const int64_t start = clock.RealtimeNs();
  host.Start(start);
  source.Start(start);
  host.Push("forward");
  host.Pop();
  const int64_t end = clock.RealtimeNs();
  host.Stop(end);
  source.Stop(end);
  RecordWriter writer;
  host.Collect(writer);
  *stats = source.Collect(writer);
  return DecodePayload(writer.Finish({0, start, end, 1})).value_or(DecodedPayload{});
}

TEST_F(CuptiSourceTest, DriverWithoutDeviceGivesHostOnlyWithoutLoadingCupti) {
  probe_ = {DeviceProbe::State::kNoDevice, 0, "cuDeviceGetCount: CUDA_ERROR_STUB_LIBRARY (34)"};
  AnnotationState state;
  HostSource host(&state, &clock_);
  CuptiSource source(Deps());
  host.set_range_listener(&source);
  PrepareError error;
  ASSERT_TRUE(host.Prepare(Request(), &error));
  ASSERT_TRUE(source.Prepare(Request(), &error)) << error.message;
  EXPECT_EQ(probes_, std::vector<bool>{false});  // never cuInit before CUPTI
  EXPECT_EQ(loads_, 0);
  CollectStats stats;
  DecodedPayload p = HostAndGpuWindow(host, source, clock_, &stats);
  EXPECT_TRUE(stats.host_only);
  const std::string reason =
      "no usable CUDA device (cuDeviceGetCount: CUDA_ERROR_STUB_LIBRARY (34))";
  EXPECT_EQ(stats.message, "host-only trace: " + reason);
  std::vector<DecodedEvent> info = p.OfKind(K(records::Kind::kCaptureInfo));
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].U32(4), records::kCaptureFlagHostOnly);
  EXPECT_EQ(info[0].name, reason);
  EXPECT_EQ(p.Ranges("forward").size(), 1u);
  EXPECT_EQ(Count("subscribe") + Count("subscribe_failed"), 0);
  EXPECT_EQ(Count("ext_push"), 0);
}

TEST_F(CuptiSourceTest, NoDriverOnTheHostGivesHostOnlyWithoutTouchingCupti) {
  // PyTorch's own CUPTI (13.2 wheel) crashes on its first call on a host
  // without libcuda: it must never be loaded there.
  probe_ =
      probe_after_cupti_ = {DeviceProbe::State::kDriverNotLoaded, 0, "libcuda.so.1 is not loaded"};
  CuptiSource::Deps deps = Deps();
  int driver_loads = 0;
  deps.load_driver = [&driver_loads](std::string* error) {
    ++driver_loads;
    *error = "libcuda.so.1 cannot be loaded";
    return false;
  };
  AnnotationState state;
  HostSource host(&state, &clock_);
  CuptiSource source(std::move(deps));
  host.set_range_listener(&source);
  PrepareError error;
  ASSERT_TRUE(host.Prepare(Request(), &error));
  ASSERT_TRUE(source.Prepare(Request(), &error)) << error.message;
  EXPECT_EQ(driver_loads, 1);
  EXPECT_EQ(loads_, 0);
  EXPECT_EQ(Count("subscribe") + Count("subscribe_failed"), 0);
  CollectStats stats;
  DecodedPayload p = HostAndGpuWindow(host, source, clock_, &stats);
  EXPECT_TRUE(stats.host_only);
  EXPECT_EQ(stats.message,
            "host-only trace: no CUDA driver on this host (libcuda.so.1 cannot be loaded); CUPTI "
            "needs one and was not loaded");
  EXPECT_EQ(p.Ranges("forward").size(), 1u);
}

TEST_F(CuptiSourceTest, SubscribeFailureWithoutADriverKeepsTheHostRanges) {
  // This machine's case: CUDA libraries loaded, no libcuda anywhere; the
  // real CUPTI answers CUPTI_ERROR_UNKNOWN.
  gpuctl_fake_cupti_reset("subscribe_unknown");
  probe_ =
      probe_after_cupti_ = {DeviceProbe::State::kDriverNotLoaded, 0, "libcuda.so.1 is not loaded"};
  AnnotationState state;
  HostSource host(&state, &clock_);
  CuptiSource source(Deps());
  host.set_range_listener(&source);
  PrepareError error;
  ASSERT_TRUE(host.Prepare(Request(), &error));
  ASSERT_TRUE(source.Prepare(Request(), &error)) << error.message;
  EXPECT_EQ(probes_, (std::vector<bool>{false, true}));
  EXPECT_EQ(Count("subscribe_failed"), 1);
  CollectStats stats;
  DecodedPayload p = HostAndGpuWindow(host, source, clock_, &stats);
  EXPECT_TRUE(stats.host_only);
  EXPECT_EQ(stats.message,
            "host-only trace: no CUDA driver in this process (libcuda.so.1 is not loaded; "
            "cuptiSubscribe: CUPTI_ERROR_UNKNOWN)");
  EXPECT_EQ(p.Ranges("forward").size(), 1u);
  std::vector<DecodedEvent> info = p.OfKind(K(records::Kind::kCaptureInfo));
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].U32(4), records::kCaptureFlagHostOnly);
  // Nothing was subscribed, so nothing is released or flushed.
  EXPECT_FALSE(source.finalize_pending());
  EXPECT_EQ(Count("flush") + Count("unsubscribe") + Count("finalize"), 0);
}

TEST_F(CuptiSourceTest, SubscribeFailureTheDriverExplainsIsHostOnly) {
  gpuctl_fake_cupti_reset("subscribe_unknown");
  probe_after_cupti_ = {DeviceProbe::State::kNoDevice, 0, "cuInit: CUDA_ERROR_NO_DEVICE (100)"};
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error)) << error.message;
  CollectStats stats;
  Window(source, &stats);
  EXPECT_TRUE(stats.host_only);
  EXPECT_EQ(stats.message,
            "host-only trace: no usable CUDA device (cuInit: CUDA_ERROR_NO_DEVICE (100); "
            "cuptiSubscribe: CUPTI_ERROR_UNKNOWN)");
}

TEST_F(CuptiSourceTest, SubscribeFailureWithAUsableDeviceIsUnavailable) {
  gpuctl_fake_cupti_reset("subscribe_unknown");
  CuptiSource source(Deps());
  PrepareError error;
  EXPECT_FALSE(source.Prepare(Request(), &error));
  EXPECT_EQ(error.status, wire::CaptureStatus::kUnavailable);
  EXPECT_EQ(error.message,
            "CUPTI is not available to gpuctl: cuptiSubscribe: CUPTI_ERROR_UNKNOWN (the CUDA "
            "driver says cuDeviceGetCount: 1 device)");
  source.Abort();
  EXPECT_EQ(Count("unsubscribe") + Count("finalize") + Count("flush"), 0);
  // The next capture tries CUPTI again.
  EXPECT_FALSE(source.Prepare(Request(), &error));
  EXPECT_EQ(Count("subscribe_failed"), 2);
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

// fork(). The test process has no other thread at the fork (the fake CUPTI
// runs none), so these run under ASan too: GCC 12's ASan can hang a child
// only when another thread was inside malloc at the fork.

// Every fake CUPTI call a child could make on the parent's behalf.
std::vector<int64_t> CuptiCallCounts() {
  std::vector<int64_t> counts;
  for (const char* what : {"subscribe", "subscribe_failed", "unsubscribe", "finalize", "flush",
                           "register_callbacks", "register_timestamp", "ext_push", "ext_pop"}) {
    counts.push_back(Count(what));
  }
  counts.push_back(Count(("enable:" + Kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)).c_str()));
  return counts;
}

// Waits for `child` and returns its exit code (-1 if it did not exit).
int ExitCodeOf(pid_t child) {
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// In the child of a process with an open window: no CUPTI call, no
// correlation, and a later window of its own completes, host-only, with
// its host ranges. Returns 0 or the number of the failed check.
int CheckForkChild(HostSource& host, CuptiSource& source, Clock& clock) {
  const std::vector<int64_t> before = CuptiCallCounts();
  if (source.OnRangePush(99)) return 20;
  if (source.finalize_pending()) return 21;
  // A CUDA call returning in the child reaches the copied callback: it must
  // not finalize the parent's CUPTI.
  gpuctl_fake_cupti_api_exit();
  PrepareError error;
  const CaptureRequest request{"child", 0, records::kDefaultActivities, 0};
  if (!host.Prepare(request, &error) || !source.Prepare(request, &error)) return 22;
  CollectStats stats;
  DecodedPayload p = HostAndGpuWindow(host, source, clock, &stats);
  if (!stats.host_only || stats.message.find("forked") == std::string::npos) return 23;
  if (p.Ranges("forward").size() != 1) return 24;
  if (!p.OfKind(K(records::Kind::kKernel)).empty()) return 25;
  // A second window works the same.
  if (!source.Prepare(request, &error)) return 26;
  HostAndGpuWindow(host, source, clock, &stats);
  if (!stats.host_only) return 27;
  if (CuptiCallCounts() != before) return 28;
  return 0;
}

TEST_F(CuptiSourceTest, ForkChildMidWindowStartsCleanAndNeverCallsCupti) {
  AnnotationState state;
  HostSource host(&state, &clock_);
  CuptiSource source(Deps());
  host.set_range_listener(&source);
  PrepareError error;
  ASSERT_TRUE(host.Prepare(Request(), &error));
  ASSERT_TRUE(source.Prepare(Request(), &error));
  start_ = clock_.RealtimeNs();
  host.Start(start_);
  source.Start(start_);
  host.Push("parent_range");  // correlated: pushed to CUPTI
  ASSERT_EQ(Count("ext_push"), 1);

  HostSource::LockRegistryForFork();
  const pid_t child = fork();
  if (child == 0) {
    host.ResetInForkChild();
    HostSource::UnlockRegistryForFork();
    source.ResetInForkChild();
    _exit(CheckForkChild(host, source, clock_));
  }
  HostSource::UnlockRegistryForFork();
  ASSERT_GT(child, 0);
  EXPECT_EQ(ExitCodeOf(child), 0);

  // The parent's window is untouched by the child.
  gpuctl_fake_cupti_launch_kernel("parent_kernel");
  host.Pop();
  end_ = clock_.RealtimeNs();
  host.Stop(end_);
  source.Stop(end_);
  RecordWriter writer;
  host.Collect(writer);
  CollectStats stats = source.Collect(writer);
  EXPECT_FALSE(stats.host_only) << stats.message;
  std::optional<DecodedPayload> p = DecodePayload(writer.Finish({0, start_, end_, 1}));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(Named(*p, records::Kind::kKernel, "parent_kernel").size(), 1u);
  EXPECT_EQ(p->Ranges("parent_range").size(), 1u);
  EXPECT_EQ(gpuctl_fake_cupti_api_exit(), 1);
  EXPECT_EQ(Count("finalize"), 1);
}

TEST_F(CuptiSourceTest, ForkChildLeavesTheParentsPendingReleaseAlone) {
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_TRUE(source.Prepare(Request(), &error));
  Window(source);
  ASSERT_TRUE(source.finalize_pending());
  const pid_t child = fork();
  if (child == 0) {
    source.ResetInForkChild();
    if (source.finalize_pending()) _exit(30);
    // The copied callback runs (the fake's copy has the domains enabled),
    // and must not finalize.
    if (gpuctl_fake_cupti_api_exit() != 1) _exit(31);
    if (Count("finalize") != 0 || source.finalizations() != 0) _exit(32);
    // The child's next Prepare neither unsubscribes nor subscribes.
    const int64_t unsubscribed = Count("unsubscribe");
    if (!source.Prepare(Request(), &error)) _exit(33);
    if (Count("unsubscribe") != unsubscribed || Count("subscribe") != 1) _exit(34);
    _exit(0);
  }
  ASSERT_GT(child, 0);
  EXPECT_EQ(ExitCodeOf(child), 0);
  // The parent still releases at its next API exit.
  EXPECT_TRUE(source.finalize_pending());
  EXPECT_EQ(gpuctl_fake_cupti_api_exit(), 1);
  EXPECT_EQ(Count("finalize"), 1);
}

TEST_F(CuptiSourceTest, ChildOfAProcessThatNeverAttachedCuptiCapturesNormally) {
  CuptiSource source(Deps());
  const pid_t child = fork();
  if (child == 0) {
    source.ResetInForkChild();
    PrepareError error;
    if (!source.Prepare(Request(), &error)) _exit(40);
    CollectStats stats;
    DecodedPayload p = Window(source, &stats);
    if (stats.host_only || Named(p, records::Kind::kKernel, "fake_kernel_a").size() != 1) _exit(41);
    _exit(0);
  }
  ASSERT_GT(child, 0);
  EXPECT_EQ(ExitCodeOf(child), 0);
}

TEST_F(CuptiSourceTest, FailedSubscribeInTheParentDoesNotMakeTheChildHostOnly) {
  gpuctl_fake_cupti_reset("subscribe_unknown");
  CuptiSource source(Deps());
  PrepareError error;
  ASSERT_FALSE(source.Prepare(Request(), &error));  // CUPTI holds nothing
  const pid_t child = fork();
  if (child == 0) {
    source.ResetInForkChild();
    gpuctl_fake_cupti_reset("basic");
    if (!source.Prepare(Request(), &error)) _exit(60);
    CollectStats stats;
    Window(source, &stats);
    _exit(stats.host_only || Count("subscribe") != 1 ? 61 : 0);
  }
  ASSERT_GT(child, 0);
  EXPECT_EQ(ExitCodeOf(child), 0);
}

// The runtime's fork handlers reach the CUPTI source (api.cc wires them to
// pthread_atfork as this test does).
std::atomic<Runtime*> g_runtime{nullptr};

TEST_F(CuptiSourceTest, RuntimeForkHandlersResetTheCuptiSource) {
  static const bool installed = [] {
    // Not analysed, as in api.cc: one handler's locks are released by another.
    pthread_atfork(
        []() GPUCTL_NO_THREAD_SAFETY_ANALYSIS {
          if (Runtime* r = g_runtime.load()) r->PrepareFork();
        },
        []() GPUCTL_NO_THREAD_SAFETY_ANALYSIS {
          if (Runtime* r = g_runtime.load()) r->ParentAfterFork();
        },
        []() GPUCTL_NO_THREAD_SAFETY_ANALYSIS {
          if (Runtime* r = g_runtime.load()) r->ChildAfterFork();
        });
    return true;
  }();
  (void)installed;
  AnnotationState state;
  AgentOptions options;
  options.socket_path = "/nonexistent/gpuctl.sock";
  Runtime runtime(
      options, &state, [](const char*) { return std::optional<std::string>(); }, Deps());
  g_runtime.store(&runtime);
  PrepareError error;
  ASSERT_TRUE(runtime.host().Prepare(Request(), &error));
  ASSERT_TRUE(runtime.cupti().Prepare(Request(), &error));
  const int64_t start = clock_.RealtimeNs();
  runtime.host().Start(start);
  runtime.cupti().Start(start);
  ASSERT_TRUE(runtime.cupti().OnRangePush(1));
  const pid_t child = fork();
  if (child == 0) {
    if (runtime.cupti().OnRangePush(2)) _exit(50);
    PrepareError child_error;
    if (!runtime.cupti().Prepare(Request(), &child_error)) _exit(51);
    CollectStats stats;
    Window(runtime.cupti(), &stats);
    if (!stats.host_only || stats.message.find("forked") == std::string::npos) _exit(52);
    _exit(Count("subscribe") == 1 && Count("flush") == 0 ? 0 : 53);
  }
  g_runtime.store(nullptr);
  ASSERT_GT(child, 0);
  EXPECT_EQ(ExitCodeOf(child), 0);
  runtime.cupti().OnRangePop();
  runtime.cupti().Abort();
  runtime.host().Abort();
}

}  // namespace
}  // namespace gpuctl::client::cupti
