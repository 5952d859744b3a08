#include "client_lib/src/cupti/fake/fake_cupti.h"

#include <cupti.h>
#include <time.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "client_lib/src/cupti/fake/fake_cupti_records.h"
#include "client_lib/src/cupti/fake/fake_cupti_scenarios.h"

namespace {

namespace fake = ::gpuctl::client::cupti::fake;

struct FakeState {
  fake::Scenario scenario;
  bool initialized = false;
  bool subscribed = false;
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  CUpti_TimestampCallbackFunc timestamp = nullptr;
  std::map<std::string, int64_t> counters;
  // Records queued by launches, each [record bytes].
  std::vector<std::string> queued;
  uint64_t window_open_ts = 0;  // first enable since the last flush
  uint32_t next_correlation = 1000;
  uint64_t last_external_id = 0;
  size_t pending_dropped = 0;
  // Kinds enabled at any time since the last flush: their records are
  // flushed even after they are disabled again, as CUPTI does.
  std::set<int> window_kinds;
};

std::recursive_mutex& Mutex() {
  static auto* mu = new std::recursive_mutex;
  return *mu;
}

FakeState& State() {
  static auto* state = new FakeState;
  if (!state->initialized) {
    state->initialized = true;
    const char* scenario = std::getenv("GPUCTL_FAKE_CUPTI_SCENARIO");
    state->scenario = fake::ScenarioNamed(scenario != nullptr ? scenario : "basic");
  }
  return *state;
}

thread_local std::vector<uint64_t> t_external_stack;

uint64_t Now() {
  FakeState& s = State();
  if (s.timestamp != nullptr) return s.timestamp();
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool Enabled(CUpti_ActivityKind kind) {
  return State().counters["enabled:" + std::to_string(static_cast<int>(kind))] != 0;
}

// Buffer layout (private to the fake): records back to back, each an u64
// byte count then the record, padded to 8.
void Deliver(const std::vector<std::string>& records) {
  FakeState& s = State();
  if (s.request == nullptr || s.complete == nullptr) return;
  size_t i = 0;
  while (i < records.size()) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    s.request(&buffer, &size, &max_records);
    if (buffer == nullptr || size == 0) {
      // No buffer: CUPTI drops what it cannot store and counts it.
      s.pending_dropped += records.size() - i;
      return;
    }
    size_t used = 0;
    while (i < records.size()) {
      const uint64_t n = records[i].size();
      const size_t need = 8 + (n + 7) / 8 * 8;
      if (used + need > size) break;
      std::memcpy(buffer + used, &n, 8);
      std::memcpy(buffer + used + 8, records[i].data(), n);
      used += need;
      ++i;
    }
    if (used == 0) {  // a record larger than the buffer
      s.pending_dropped += records.size() - i;
      s.complete(nullptr, 0, buffer, size, 0);
      return;
    }
    s.complete(nullptr, 0, buffer, size, used);
  }
}

void Count(const std::string& what, int64_t delta = 1) { State().counters[what] += delta; }

}  // namespace

extern "C" {

void gpuctl_fake_cupti_reset(const char* scenario) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  s = FakeState{};
  s.initialized = true;
  s.scenario = fake::ScenarioNamed(scenario != nullptr ? scenario : "basic");
  t_external_stack.clear();
}

int gpuctl_fake_cupti_api_exit(void) {
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  {
    std::lock_guard lock(Mutex());
    FakeState& s = State();
    if (!s.subscribed || s.counters["domain:1"] == 0) return 0;
    callback = s.callback;
    userdata = s.userdata;
  }
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_EXIT;
  data.functionName = "cudaLaunchKernel";
  callback(userdata, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
           &data);
  return 1;
}

void gpuctl_fake_cupti_launch_kernel(const char* name) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  const uint32_t correlation = s.next_correlation++;
  const uint64_t now = Now();
  if (Enabled(CUPTI_ACTIVITY_KIND_RUNTIME)) {
    s.queued.push_back(fake::Api(CUPTI_ACTIVITY_KIND_RUNTIME,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, correlation, now,
                                 now + 1));
  }
  if (Enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
    // Kernel names live as long as the process, as CUPTI's do.
    static auto* names = new std::set<std::string>;
    const char* stable = names->insert(name).first->c_str();
    s.queued.push_back(fake::Kernel(stable, 0, 7, correlation, now + 2, now + 3, 0, 0));
  }
  if (Enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) && !t_external_stack.empty()) {
    s.queued.push_back(fake::ExternalCorrelation(t_external_stack.back(), correlation));
  }
}

int64_t gpuctl_fake_cupti_count(const char* what) {
  std::lock_guard lock(Mutex());
  auto& counters = State().counters;
  auto it = counters.find(what);
  return it == counters.end() ? 0 : it->second;
}

uint64_t gpuctl_fake_cupti_last_external_id(void) {
  std::lock_guard lock(Mutex());
  return State().last_external_id;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  if (s.scenario.subscriber_conflict || s.subscribed) {
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  // What the real CUPTI returns when it cannot reach a driver.
  if (s.scenario.subscribe_unknown) {
    Count("subscribe_failed");
    return CUPTI_ERROR_UNKNOWN;
  }
  s.subscribed = true;
  s.callback = callback;
  s.userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&s);
  Count("subscribe");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  if (!s.subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&s)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  s.subscribed = false;
  s.callback = nullptr;
  s.counters["domain:1"] = s.counters["domain:2"] = 0;
  Count("unsubscribe");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  if (!s.subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&s)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  s.counters["domain:" + std::to_string(static_cast<int>(domain))] = enable != 0 ? 1 : 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiFinalize(void) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  // Detaches everything, as the real one does.
  s.subscribed = false;
  s.callback = nullptr;
  s.request = nullptr;
  s.complete = nullptr;
  s.timestamp = nullptr;
  for (auto& [name, value] : s.counters) {
    if (name.rfind("enabled:", 0) == 0 || name.rfind("domain:", 0) == 0) value = 0;
  }
  Count("finalize");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  switch (result) {
    case CUPTI_SUCCESS:
      *str = "CUPTI_SUCCESS";
      return CUPTI_SUCCESS;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      return CUPTI_SUCCESS;
    case CUPTI_ERROR_NOT_INITIALIZED:
      *str = "CUPTI_ERROR_NOT_INITIALIZED";
      return CUPTI_SUCCESS;
    case CUPTI_ERROR_UNKNOWN:
      *str = "CUPTI_ERROR_UNKNOWN";
      return CUPTI_SUCCESS;
    default:
      return CUPTI_ERROR_INVALID_PARAMETER;
  }
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  if (s.scenario.no_device) return CUPTI_ERROR_NOT_INITIALIZED;
  if (s.request == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
  const std::string k = std::to_string(static_cast<int>(kind));
  Count("enable:" + k);
  if (s.timestamp == nullptr) Count("enable_without_timestamp");
  if (s.window_open_ts == 0) s.window_open_ts = Now();
  s.counters["enabled:" + k] = 1;
  s.window_kinds.insert(static_cast<int>(kind));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard lock(Mutex());
  State().counters["enabled:" + std::to_string(static_cast<int>(kind))] = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  s.request = request;
  s.complete = complete;
  Count("register_callbacks");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc callback) {
  std::lock_guard lock(Mutex());
  State().timestamp = callback;
  Count("register_timestamp");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  Count("flush");
  if (s.window_open_ts == 0 && s.queued.empty()) return CUPTI_SUCCESS;
  const uint64_t t1 = Now();
  std::vector<std::string> records = std::move(s.queued);
  s.queued.clear();
  if (s.window_open_ts != 0) {
    std::vector<std::string> window =
        fake::ScenarioRecords(s.scenario, s.window_kinds, s.window_open_ts, t1);
    records.insert(records.end(), window.begin(), window.end());
  }
  s.window_open_ts = 0;
  s.window_kinds.clear();
  s.pending_dropped += fake::DroppedPerFlush(s.scenario);
  if (s.scenario.fail_mid_window) {
    records.resize(records.size() / 2);
    Deliver(records);
    return CUPTI_ERROR_UNKNOWN;
  }
  Deliver(records);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid_size,
                                                CUpti_Activity** record) {
  size_t offset = 0;
  if (*record != nullptr) {
    const uint8_t* current = reinterpret_cast<uint8_t*>(*record);
    uint64_t n = 0;
    std::memcpy(&n, current - 8, 8);
    offset = static_cast<size_t>(current - buffer) + (n + 7) / 8 * 8;
  }
  if (offset + 8 > valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset + 8);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  std::lock_guard lock(Mutex());
  FakeState& s = State();
  *dropped = s.pending_dropped;
  s.pending_dropped = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attribute, size_t* size,
                                               void* value) {
  std::lock_guard lock(Mutex());
  int64_t v = 0;
  if (*size == 1) v = *static_cast<uint8_t*>(value);
  if (*size == sizeof(size_t)) v = static_cast<int64_t>(*static_cast<size_t*>(value));
  State().counters["attr:" + std::to_string(static_cast<int>(attribute))] = v;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                            uint64_t id) {
  if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard lock(Mutex());
  t_external_stack.push_back(id);
  State().last_external_id = id;
  Count("ext_push");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                           uint64_t* last) {
  if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard lock(Mutex());
  if (t_external_stack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  *last = t_external_stack.back();
  t_external_stack.pop_back();
  Count("ext_pop");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  std::lock_guard lock(Mutex());
  *timestamp = Now();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                          const char** name) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
      cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
    *name = "cudaLaunchKernel_v7000";
    return CUPTI_SUCCESS;
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) {
    *name = "cuLaunchKernel";
    return CUPTI_SUCCESS;
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

}  // extern "C"
