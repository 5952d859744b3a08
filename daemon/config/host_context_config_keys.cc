// The host_context section: the perf sampling of trace windows that ask
// for it, activities cpu / sched (daemon/hostctx, docs/host-context.md).
#include "absl/strings/str_cat.h"
#include "daemon/config/config_schema.h"

namespace gpuctl::daemon {
namespace {

constexpr uint64_t kMaxFrequencyHz = 1000;
constexpr uint64_t kMinSamples = 1000;
constexpr uint64_t kMaxSamples = 10000000;
// SamplerOptions::ring_pages: a power of two (the kernel's rule for a
// ring's data pages) up to the sampler's own bound.
constexpr uint64_t kMaxRingPages = 4096;

constexpr ConfigKey kHostContextKeys[] = {
    {.name = "frequency_hz",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<uint64_t> n = v.Count(1, kMaxFrequencyHz);
           if (!n.ok()) return n.status();
           o->host_context.sampler.frequency_hz = static_cast<int>(*n);
           return absl::OkStatus();
         }},
    {.name = "max_samples",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<uint64_t> n = v.Count(kMinSamples, kMaxSamples);
           if (!n.ok()) return n.status();
           o->host_context.sampler.max_samples = *n;
           return absl::OkStatus();
         }},
    {.name = "ring_pages",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<uint64_t> n = v.Count(1, kMaxRingPages);
           if (!n.ok()) return n.status();
           if ((*n & (*n - 1)) != 0) {
             return v.Error(absl::StrCat(*n, " is not a power of two (1, 2, 4, ... ", kMaxRingPages,
                                         " pages per sampled thread)"));
           }
           o->host_context.sampler.ring_pages = *n;
           return absl::OkStatus();
         }},
};

}  // namespace

absl::Span<const ConfigKey> HostContextConfigKeys() { return kHostContextKeys; }

}  // namespace gpuctl::daemon
