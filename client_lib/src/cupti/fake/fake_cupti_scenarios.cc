#include "client_lib/src/cupti/fake/fake_cupti_scenarios.h"

#include <cupti.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "client_lib/src/cupti/fake/fake_cupti_records.h"

namespace gpuctl::client::cupti::fake {
namespace {

// Where a window's records go: `at(i)` is the i-th of 64 even steps.
class Window {
 public:
  Window(const std::set<int>& kinds, uint64_t t0, uint64_t t1)
      : kinds_(kinds), t0_(t0), t1_(t1), step_(std::max<uint64_t>(1, (t1 - t0) / 64)) {}
  bool Has(CUpti_ActivityKind kind) const { return kinds_.count(static_cast<int>(kind)) > 0; }
  uint64_t at(int i) const { return t0_ + static_cast<uint64_t>(i) * step_; }
  uint64_t t0() const { return t0_; }
  uint64_t t1() const { return t1_; }

 private:
  const std::set<int>& kinds_;
  uint64_t t0_;
  uint64_t t1_;
  uint64_t step_;
};

using Records = std::vector<std::string>;

void AddApiCalls(const Window& w, Records* out) {
  if (w.Has(CUPTI_ACTIVITY_KIND_RUNTIME)) {
    out->push_back(Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                       1, w.at(1), w.at(2)));
    out->push_back(Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
                       2, w.at(2), w.at(3)));
  }
  if (w.Has(CUPTI_ACTIVITY_KIND_DRIVER)) {
    out->push_back(Api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 8,
                       w.at(1), w.at(2)));
    out->push_back(Api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, 9,
                       w.at(2), w.at(3)));
  }
}

void AddKernels(const Scenario& scenario, const Window& w, Records* out) {
  if (!w.Has(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) return;
  out->push_back(Kernel("fake_kernel_a", 0, 7, 1, w.at(3), w.at(5), 0, 0));
  out->push_back(Kernel("graph_kernel", 0, 13, 3, w.at(5), w.at(6), 5, 77));
  if (scenario.devices == 2) {
    out->push_back(Kernel("fake_kernel_b", 1, 21, 10, w.at(4), w.at(7), 0, 0));
  }
  // Outside the window: clipped by the library.
  out->push_back(
      Kernel("early_kernel", 0, 7, 11, w.t0() - 10'000'000'000, w.t0() - 9'000'000'000, 0, 0));
  out->push_back(
      Kernel("late_kernel", 0, 7, 12, w.t1() + 9'000'000'000, w.t1() + 10'000'000'000, 0, 0));
  if (scenario.flood) {
    for (int i = 0; i < 20000; ++i) {
      out->push_back(Kernel("flood_kernel", 0, 7, 100000 + i, w.at(8), w.at(9), 0, 0));
    }
  }
}

std::string HostToDeviceCopy(const Window& w) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  m.bytes = 4096;
  m.start = w.at(6);
  m.end = w.at(7);
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = 7;
  m.correlationId = 4;
  m.graphId = 0;
  return Bytes(m);
}

std::string PeerToPeerCopy(const Window& w) {
  CUpti_ActivityMemcpyPtoP4 p{};
  p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  p.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  p.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  p.bytes = 1 << 20;
  p.start = w.at(8);
  p.end = w.at(9);
  p.deviceId = 0;
  p.contextId = 1;
  p.streamId = 7;
  p.srcDeviceId = 0;
  p.srcContextId = 1;
  p.dstDeviceId = 1;
  p.dstContextId = 2;
  p.correlationId = 13;
  return Bytes(p);
}

std::string Memset(const Window& w) {
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.value = 0xab;
  m.bytes = 256;
  m.start = w.at(7);
  m.end = w.at(8);
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = 7;
  m.correlationId = 5;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  return Bytes(m);
}

std::string StreamSynchronize(const Window& w) {
  CUpti_ActivitySynchronization2 y{};
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  y.start = w.at(9);
  y.end = w.at(10);
  y.correlationId = 6;
  y.contextId = 1;
  y.streamId = 7;
  y.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  return Bytes(y);
}

// An NVTX range (start and end) and a mark.
void AddMarkers(const Window& w, Records* out) {
  CUpti_ActivityMarker2 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  m.timestamp = w.at(10);
  m.id = 1;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.processId = static_cast<uint32_t>(getpid());
  m.objectId.pt.threadId = Tid();
  m.name = "nvtx_range";
  m.domain = "fake_domain";
  out->push_back(Bytes(m));
  m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  m.timestamp = w.at(12);
  m.name = nullptr;
  m.domain = nullptr;
  out->push_back(Bytes(m));
  m.flags = CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
  m.timestamp = w.at(11);
  m.id = 2;
  m.name = "nvtx_mark";
  out->push_back(Bytes(m));
}

std::string BufferFlushOverhead(const Window& w) {
  CUpti_ActivityOverhead3 o{};
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o.objectId.pt.processId = static_cast<uint32_t>(getpid());
  o.objectId.pt.threadId = Tid();
  o.start = w.at(12);
  o.end = w.at(13);
  o.correlationId = 0;
  return Bytes(o);
}

void AddTransfersAndSync(const Scenario& scenario, const Window& w, Records* out) {
  if (w.Has(CUPTI_ACTIVITY_KIND_MEMCPY)) out->push_back(HostToDeviceCopy(w));
  if (w.Has(CUPTI_ACTIVITY_KIND_MEMCPY2) && scenario.devices == 2) {
    out->push_back(PeerToPeerCopy(w));
  }
  if (w.Has(CUPTI_ACTIVITY_KIND_MEMSET)) out->push_back(Memset(w));
  if (w.Has(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) out->push_back(StreamSynchronize(w));
}

// Device memory, device 0: in the window's first sixteenth a pool created,
// a 1 MiB stream-ordered allocation from it, a 4 MiB cudaMalloc, the 1 MiB
// freed and the pool trimmed; then fourteen 1 MiB allocations at even
// steps to 73 % of the window (18 MiB allocated at the end, the peak).
// multi_device adds 8 MiB on device 1. One allocation lies before the
// window (clipped by the library).
void AddDeviceMemory(const Scenario& scenario, const Window& w, Records* out) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  constexpr uint64_t kPool = 0x7f0040000000;
  if (w.Has(CUPTI_ACTIVITY_KIND_MEMORY_POOL)) {
    out->push_back(MemoryPool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0, kPool, 2 * kMiB,
                              0, w.at(1)));
    out->push_back(
        MemoryPool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, 0, kPool, 0, 0, w.at(4)));
  }
  if (!w.Has(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
  const auto alloc = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  out->push_back(Memory(alloc, 0, 0x7e0000000000, 64 * kMiB, w.t0() - 10'000'000'000, 0, 0));
  out->push_back(Memory(alloc, 0, kPool, kMiB, w.at(1), 7, 2 * kMiB));
  out->push_back(Memory(alloc, 0, 0x7f0000000000, 4 * kMiB, w.at(2), 0, 0));
  out->push_back(
      Memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0, kPool, kMiB, w.at(3), 7, 2 * kMiB));
  for (uint64_t i = 0; i < 14; ++i) {
    out->push_back(
        Memory(alloc, 0, 0x7f0100000000 + i * kMiB, kMiB, w.at(8 + 3 * static_cast<int>(i)), 0, 0));
  }
  if (scenario.devices == 2) {
    out->push_back(Memory(alloc, 1, 0x7f2000000000, 8 * kMiB, w.at(5), 0, 0));
  }
}

}  // namespace

Scenario ScenarioNamed(const std::string& name) {
  Scenario s;
  s.name = name;
  s.devices = name == "multi_device" ? 2 : 1;
  s.flood = name == "flood";
  s.subscriber_conflict = name == "subscriber_conflict";
  s.subscribe_unknown = name == "subscribe_unknown";
  s.no_device = name == "no_device";
  s.fail_mid_window = name == "fail_mid_window";
  return s;
}

size_t DroppedPerFlush(const Scenario& scenario) { return scenario.flood ? 7 : 0; }

std::vector<std::string> ScenarioRecords(const Scenario& scenario,
                                         const std::set<int>& kinds_in_window, uint64_t t0,
                                         uint64_t t1) {
  const Window w(kinds_in_window, t0, t1);
  Records out;
  if (w.Has(CUPTI_ACTIVITY_KIND_DEVICE)) {
    out.push_back(Device(0, "Fake GPU 0"));
    if (scenario.devices == 2) out.push_back(Device(1, "Fake GPU 1"));
  }
  AddApiCalls(w, &out);
  AddKernels(scenario, w, &out);
  AddTransfersAndSync(scenario, w, &out);
  if (w.Has(CUPTI_ACTIVITY_KIND_MARKER)) AddMarkers(w, &out);
  if (w.Has(CUPTI_ACTIVITY_KIND_OVERHEAD)) out.push_back(BufferFlushOverhead(w));
  AddDeviceMemory(scenario, w, &out);
  if (w.Has(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) out.push_back(ExternalCorrelation(0xabc, 1));
  // A kind gpuctl does not use: skipped by the library.
  CUpti_ActivityCudaEvent2 unknown{};
  unknown.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
  out.push_back(Bytes(unknown));
  return out;
}

}  // namespace gpuctl::client::cupti::fake
