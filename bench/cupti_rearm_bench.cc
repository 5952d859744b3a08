// gpuctl_cupti_rearm_bench: gpuctl's own cost of arming, closing and
// re-arming a CUPTI window, over the fake CUPTI (client_lib/src/cupti/fake/),
// so that CUPTI's and the driver's share is left out.
//
// Each cycle is one window of CuptiSource, phase by phase:
//   arm      Prepare: the scan for CUDA libraries and the driver probe
//            (real, on this process), subscribe, timestamp and buffer
//            callbacks, buffer attributes (after the previous window's
//            release)
//   open     Start: enable the asked kinds (what the window's start costs)
//   close    Stop: disable, forced flush (the fake delivers its ~20
//            records through the buffer callbacks), API domains for the
//            release
//   release  the job's next API exit: gpuctl's callback calls cuptiFinalize
//   collect  the window's records into a payload (agent thread, after the
//            window)
// A second series re-arms with no API call between windows (the next
// Prepare unsubscribes instead of finalizing).
//
// Baseline, in the same run and alternating with the gpuctl cycles: the
// same CUPTI calls made directly on the fake with trivial callbacks (no
// gpuctl logic). gpuctl / baseline is what gpuctl adds on top of the calls
// it has to make.
//
// Usage: gpuctl_cupti_rearm_bench [--cycles N] [--kinds default|kernel]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client_lib/src/clock.h"
#include "client_lib/src/cupti/cupti_source.h"
#include "client_lib/src/cupti/fake/fake_cupti_table.h"
#include "client_lib/src/record_writer.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client::cupti {
namespace {

using Steady = std::chrono::steady_clock;

struct Options {
  int cycles = 5000;
  uint32_t activities = records::kDefaultActivities;
};

struct Samples {
  std::vector<double> us;
  void Add(Steady::time_point a, Steady::time_point b) {
    us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  double Percentile(double p) {
    std::sort(us.begin(), us.end());
    const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(us.size())));
    return us[std::min(i == 0 ? 0 : i - 1, us.size() - 1)];
  }
};

struct Phases {
  Samples arm, open, close, release, collect, total;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (std::strcmp(arg, "--cycles") == 0 && value != nullptr) {
      o->cycles = std::atoi(value);
      ++i;
    } else if (std::strcmp(arg, "--kinds") == 0 && value != nullptr) {
      if (std::strcmp(value, "kernel") == 0) {
        o->activities = records::kActivityKernel;
      } else if (std::strcmp(value, "default") != 0) {
        return false;
      }
      ++i;
    } else {
      return false;
    }
  }
  return o->cycles >= 100 && o->cycles <= 10'000'000;
}

void Fail(const std::string& what) {
  std::fprintf(stderr, "gpuctl_cupti_rearm_bench: %s\n", what.c_str());
  std::exit(1);
}

// One gpuctl window; `finalize` false: no API call before the next Prepare.
void GpuctlCycle(CuptiSource& source, Clock& clock, const CaptureRequest& request, bool finalize,
                 Phases* p) {
  PrepareError error;
  const Steady::time_point t0 = Steady::now();
  if (!source.Prepare(request, &error)) Fail("Prepare: " + error.message);
  const Steady::time_point t1 = Steady::now();
  source.Start(clock.RealtimeNs());
  const Steady::time_point t2 = Steady::now();
  // The end instant only clips records; a second ahead keeps every record
  // of the fake's window, whatever the scheduler did in between.
  source.Stop(clock.RealtimeNs() + 1'000'000'000);
  const Steady::time_point t3 = Steady::now();
  if (finalize && gpuctl_fake_cupti_api_exit() != 1) Fail("no API-exit callback");
  const Steady::time_point t4 = Steady::now();
  RecordWriter writer;
  const CollectStats stats = source.Collect(writer);
  const Steady::time_point t5 = Steady::now();
  if (stats.host_only || writer.event_count() < 3) {
    Fail("the window recorded nothing: " + std::to_string(writer.event_count()) + " " +
         stats.message);
  }
  p->arm.Add(t0, t1);
  p->open.Add(t1, t2);
  p->close.Add(t2, t3);
  p->release.Add(t3, t4);
  p->collect.Add(t4, t5);
  p->total.Add(t0, t5);
}

// The baseline's buffer callbacks: hand out a buffer, walk the records.
void CUPTIAPI BareRequest(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 1 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI BareComplete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  size_t n = 0;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) ++n;
  std::free(buffer);
  if (n == 0) Fail("baseline: empty buffer");
}

uint64_t CUPTIAPI BareTimestamp() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

void CUPTIAPI BareApiCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {
  cuptiFinalize();
}

std::vector<CUpti_ActivityKind> KindsFor(uint32_t activities) {
  std::vector<CUpti_ActivityKind> kinds;
  if (activities & records::kActivityKernel) kinds.push_back(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (activities & records::kActivityMemcpy) {
    kinds.push_back(CUPTI_ACTIVITY_KIND_MEMCPY);
    kinds.push_back(CUPTI_ACTIVITY_KIND_MEMCPY2);
  }
  if (activities & records::kActivityMemset) kinds.push_back(CUPTI_ACTIVITY_KIND_MEMSET);
  if (activities & records::kActivityRuntime) kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
  if (activities & records::kActivitySync) kinds.push_back(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  if (activities & records::kActivityNvtx) kinds.push_back(CUPTI_ACTIVITY_KIND_MARKER);
  if (activities & records::kActivityOverhead) kinds.push_back(CUPTI_ACTIVITY_KIND_OVERHEAD);
  kinds.push_back(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  kinds.push_back(CUPTI_ACTIVITY_KIND_DEVICE);
  return kinds;
}

// The same CUPTI calls, phase for phase, without gpuctl.
void BareCycle(const std::vector<CUpti_ActivityKind>& kinds, bool finalize, Phases* p) {
  static CUpti_SubscriberHandle subscriber = nullptr;
  static bool pending = false;
  const Steady::time_point t0 = Steady::now();
  if (pending) {  // no API call came: unsubscribe instead
    cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    cuptiUnsubscribe(subscriber);
    pending = false;
  }
  if (cuptiSubscribe(&subscriber, &BareApiCallback, nullptr) != CUPTI_SUCCESS) {
    Fail("baseline: cuptiSubscribe");
  }
  cuptiActivityRegisterTimestampCallback(&BareTimestamp);
  cuptiActivityRegisterCallbacks(&BareRequest, &BareComplete);
  uint8_t per_thread = 1;
  size_t size = sizeof(per_thread);
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
  size_t value = CuptiSource::kDeviceBufferBytes;
  size = sizeof(value);
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &value);
  value = CuptiSource::kDeviceBufferPoolLimit;
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &size, &value);
  const Steady::time_point t1 = Steady::now();
  for (CUpti_ActivityKind kind : kinds) cuptiActivityEnable(kind);
  const Steady::time_point t2 = Steady::now();
  for (CUpti_ActivityKind kind : kinds) cuptiActivityDisable(kind);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  pending = true;
  const Steady::time_point t3 = Steady::now();
  if (finalize) {
    if (gpuctl_fake_cupti_api_exit() != 1) Fail("baseline: no API-exit callback");
    pending = false;
  }
  const Steady::time_point t4 = Steady::now();
  p->arm.Add(t0, t1);
  p->open.Add(t1, t2);
  p->close.Add(t2, t3);
  p->release.Add(t3, t4);
  p->collect.Add(t4, t4);
  p->total.Add(t0, t4);
}

void Row(const char* phase, Samples& gpuctl, Samples& bare) {
  const double g50 = gpuctl.Percentile(0.50);
  const double g99 = gpuctl.Percentile(0.99);
  const double b50 = bare.Percentile(0.50);
  const double b99 = bare.Percentile(0.99);
  char ratio[32] = "-";
  if (b50 > 0.05) std::snprintf(ratio, sizeof(ratio), "%.2f", g50 / b50);
  std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %s |\n", phase, g50, g99, b50, b99, ratio);
}

void Report(const char* title, Phases& g, Phases& b, bool finalize) {
  std::printf("\n%s\n\n", title);
  std::printf(
      "| phase | gpuctl p50 us | gpuctl p99 us | bare calls p50 us | bare calls p99 us |"
      " gpuctl / bare (p50) |\n|---|---:|---:|---:|---:|---:|\n");
  Row("arm (Prepare)", g.arm, b.arm);
  Row("open (Start)", g.open, b.open);
  Row("close (Stop)", g.close, b.close);
  if (finalize) Row("release (finalize at API exit)", g.release, b.release);
  Row("collect", g.collect, b.collect);
  Row("whole cycle", g.total, b.total);
}

void Series(const Options& o, bool finalize, const char* title) {
  RealClock clock;
  CuptiSource::Deps deps;
  deps.clock = &clock;
  deps.load = [](std::string*) -> std::optional<CuptiApi> { return testing::FakeCuptiApi(); };
  // The real scans of the process (loaded objects, the driver probe), so
  // their cost is in "arm"; this process has no CUDA library, so the scan's
  // answer is overridden and the fake stands in for CUPTI.
  deps.process_has_cuda = [] {
    (void)ProcessHasCuda(ProcessLoaderEnvironment());
    return true;
  };
  deps.probe_devices = [](bool may_initialize) {
    return ProbeCudaDevices(ProcessLoaderEnvironment(), may_initialize);
  };
  const CaptureRequest request{"bench", 0, o.activities, 0};
  const std::vector<CUpti_ActivityKind> kinds = KindsFor(o.activities);
  Phases gpuctl;
  Phases bare;
  {
    CuptiSource source(deps);
    gpuctl_fake_cupti_reset("basic");
    Phases warmup;
    for (int i = 0; i < o.cycles / 10; ++i) GpuctlCycle(source, clock, request, finalize, &warmup);
    // Alternating blocks, so both see the same machine.
    constexpr int kBlock = 50;
    for (int done = 0; done < o.cycles; done += kBlock) {
      for (int i = 0; i < kBlock; ++i) GpuctlCycle(source, clock, request, finalize, &gpuctl);
      // Releases what the last window left pending (no GPU activity asked).
      PrepareError error;
      source.Prepare(CaptureRequest{"bench", 0, 0, 0}, &error);
      gpuctl_fake_cupti_reset("basic");
      for (int i = 0; i < kBlock; ++i) BareCycle(kinds, finalize, &bare);
      if (!finalize) BareCycle(kinds, true, &warmup);  // leaves the fake free
      gpuctl_fake_cupti_reset("basic");
    }
  }
  Report(title, gpuctl, bare, finalize);
}

}  // namespace
}  // namespace gpuctl::client::cupti

int main(int argc, char** argv) {
  gpuctl::client::cupti::Options options;
  if (!gpuctl::client::cupti::ParseArgs(argc, argv, &options)) {
    std::fprintf(
        stderr, "usage: gpuctl_cupti_rearm_bench [--cycles N (>= 100)] [--kinds default|kernel]\n");
    return 2;
  }
  std::printf("gpuctl_cupti_rearm_bench: %d cycles per series, fake CUPTI\n", options.cycles);
  gpuctl::client::cupti::Series(options, true,
                                "Re-arm after the release at the next API exit (cuptiFinalize)");
  gpuctl::client::cupti::Series(options, false,
                                "Re-arm with no API call between windows (unsubscribe)");
  return 0;
}
