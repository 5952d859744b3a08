#include "client_lib/src/cupti/cupti_source.h"

#include <sched.h>

#include <cstdlib>
#include <new>
#include <utility>

#include "client_lib/src/activities.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::client::cupti {
namespace {

// CUPTI's buffer and timestamp callbacks carry no context: they reach the
// prepared source and its clock through these.
std::atomic<CuptiSource*> g_active{nullptr};
std::atomic<Clock*> g_clock{nullptr};

struct KindForActivity {
  uint32_t activity;
  CUpti_ActivityKind kind;
};

// CONCURRENT_KERNEL, never KERNEL (which serializes kernels).
constexpr KindForActivity kKinds[] = {
    {records::kActivityKernel, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {records::kActivityMemcpy, CUPTI_ACTIVITY_KIND_MEMCPY},
    {records::kActivityMemcpy, CUPTI_ACTIVITY_KIND_MEMCPY2},
    {records::kActivityMemset, CUPTI_ACTIVITY_KIND_MEMSET},
    {records::kActivityRuntime, CUPTI_ACTIVITY_KIND_RUNTIME},
    {records::kActivityDriver, CUPTI_ACTIVITY_KIND_DRIVER},
    {records::kActivitySync, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
    {records::kActivityNvtx, CUPTI_ACTIVITY_KIND_MARKER},
    {records::kActivityOverhead, CUPTI_ACTIVITY_KIND_OVERHEAD},
    {records::kActivityMemory, CUPTI_ACTIVITY_KIND_MEMORY2},
    {records::kActivityMemory, CUPTI_ACTIVITY_KIND_MEMORY_POOL},
};

// What CUPTI returns when the driver finds no usable GPU.
bool IsNoDevice(CUptiResult result) {
  return result == CUPTI_ERROR_NOT_INITIALIZED || result == CUPTI_ERROR_INVALID_DEVICE;
}

}  // namespace

CuptiSource::CuptiSource(Deps deps) : deps_(std::move(deps)) {}

CuptiSource::~CuptiSource() {
  Abort();
  SettleRelease();
  CuptiSource* self = this;
  if (g_active.compare_exchange_strong(self, nullptr)) g_clock.store(nullptr);
}

uint64_t CUPTIAPI CuptiSource::Timestamp() {
  Clock* clock = g_clock.load(std::memory_order_acquire);
  return static_cast<uint64_t>(clock != nullptr ? clock->RealtimeNs()
                                                : ReadClockNs(CLOCK_REALTIME));
}

std::string CuptiSource::ResultString(CUptiResult result) const {
  const char* text = nullptr;
  if (api_->GetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) {
    return "CUPTI error " + std::to_string(static_cast<int>(result));
  }
  return text;
}

void CuptiSource::SettleRelease() {
  int expected = kReleasePending;
  if (release_.compare_exchange_strong(expected, kReleaseIdle)) {
    // No API call came since the last window: unsubscribe here instead.
    api_->EnableDomain(0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API);
    api_->EnableDomain(0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
    api_->Unsubscribe(subscriber_);
  }
  // Or the API-exit callback finalized (or is finalizing) CUPTI, which
  // removes the subscriber with it.
  while (release_.load(std::memory_order_acquire) == kReleaseFinalizing) sched_yield();
  subscribed_ = false;
  released_ = false;
}

void CuptiSource::ResetWindow() {
  activities_ = enabled_ = 0;
  enabled_kinds_.clear();
  host_only_ = failed_ = false;
  message_.clear();
  MutexLock lock(&mu_);
  accepting_ = false;
  cupti_dropped_ = 0;
  translator_.Reset(0, 0, nullptr);
}

DeviceProbe CuptiSource::ProbeDevices(bool may_initialize) const {
  if (!deps_.probe_devices) return {};
  return deps_.probe_devices(may_initialize);
}

bool CuptiSource::PrepareHostOnly(std::string reason) {
  host_only_ = true;
  message_ = std::move(reason);
  return true;
}

bool CuptiSource::OnSubscribeFailed(CUptiResult result, PrepareError* error) {
  const std::string cupti_said = "cuptiSubscribe: " + ResultString(result);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    *error = {wire::CaptureStatus::kBusy, "CUPTI is not available to gpuctl: " + cupti_said +
                                              " (another tool, e.g. Nsight or a profiler, owns "
                                              "CUPTI)"};
    return false;
  }
  if (IsNoDevice(result)) return PrepareHostOnly("no usable CUDA device (" + cupti_said + ")");
  // CUPTI's own codes rarely name the cause (a missing driver is
  // CUPTI_ERROR_UNKNOWN): ask the driver, which CUPTI has loaded and
  // initialized by now if it could.
  const DeviceProbe probe = ProbeDevices(/*may_initialize=*/true);
  switch (probe.state) {
    case DeviceProbe::State::kNoDevice:
      return PrepareHostOnly("no usable CUDA device (" + probe.detail + "; " + cupti_said + ")");
    case DeviceProbe::State::kDriverNotLoaded:
      return PrepareHostOnly("no CUDA driver in this process (" + probe.detail + "; " + cupti_said +
                             ")");
    default:
      break;
  }
  std::string message = "CUPTI is not available to gpuctl: " + cupti_said;
  if (!probe.detail.empty()) message += " (the CUDA driver says " + probe.detail + ")";
  *error = {wire::CaptureStatus::kUnavailable, std::move(message)};
  return false;
}

bool CuptiSource::Prepare(const CaptureRequest& request, PrepareError* error) {
  Abort();
  SettleRelease();
  ResetWindow();
  activities_ = request.activities;
  if (activities_ == 0) return true;
  if (fork_child_of_cupti_) {
    return PrepareHostOnly(
        "this process was forked from one that had attached CUPTI; CUDA and CUPTI are not "
        "usable in a fork child of a process that initialized them");
  }
  if (!deps_.force_load && !deps_.process_has_cuda()) {
    return PrepareHostOnly("no CUDA library is loaded in this process");
  }
  // A driver already loaded and initialized that has no device: no need to
  // load CUPTI at all. An uninitialized driver is left alone.
  const DeviceProbe probe = ProbeDevices(/*may_initialize=*/false);
  if (probe.state == DeviceProbe::State::kNoDevice) {
    return PrepareHostOnly("no usable CUDA device (" + probe.detail + ")");
  }
  // No driver in the process: CUPTI would load it; without one on the host,
  // CUPTI must not be touched at all. An explicit GPUCTL_CUPTI_PATH is the
  // user's choice and is loaded regardless.
  if (probe.state == DeviceProbe::State::kDriverNotLoaded && !deps_.force_load &&
      deps_.load_driver) {
    std::string why;
    if (!deps_.load_driver(&why)) {
      return PrepareHostOnly("no CUDA driver on this host (" + why +
                             "); CUPTI needs one and was not loaded");
    }
  }
  if (!api_) {
    std::string load_error;
    api_ = deps_.load(&load_error);
    if (!api_) {
      *error = {wire::CaptureStatus::kUnavailable, load_error};
      return false;
    }
  }
  // Set before the call: a fork during it must not let the child use the
  // copy; a failed subscribe leaves CUPTI holding nothing.
  const bool attached_before = cupti_attached_once_.exchange(true, std::memory_order_relaxed);
  const CUptiResult subscribed = api_->Subscribe(&subscriber_, &OnApiCallback, this);
  if (subscribed != CUPTI_SUCCESS) {
    cupti_attached_once_.store(attached_before, std::memory_order_relaxed);
    return OnSubscribeFailed(subscribed, error);
  }
  subscribed_ = true;
  released_ = false;
  g_clock.store(deps_.clock, std::memory_order_release);
  g_active.store(this, std::memory_order_release);
  int64_t offset = 0;
  // After every subscribe: cuptiFinalize forgets the timestamp callback.
  if (api_->ActivityRegisterTimestampCallback == nullptr ||
      api_->ActivityRegisterTimestampCallback(&Timestamp) != CUPTI_SUCCESS) {
    uint64_t cupti_now = 0;
    if (api_->GetTimestamp(&cupti_now) == CUPTI_SUCCESS) {
      offset = deps_.clock->RealtimeNs() - static_cast<int64_t>(cupti_now);
    }
  }
  const CUptiResult registered =
      api_->ActivityRegisterCallbacks(&OnBufferRequested, &OnBufferCompleted);
  if (registered != CUPTI_SUCCESS) {
    *error = {wire::CaptureStatus::kUnavailable,
              "cuptiActivityRegisterCallbacks: " + ResultString(registered)};
    api_->Unsubscribe(subscriber_);
    subscribed_ = false;
    return false;
  }
  SetAttributes();
  buffer_bytes_ = request.activity_buffer_bytes != 0
                      ? std::max(request.activity_buffer_bytes, kMinBufferBytes)
                      : kDefaultBufferBytes;
  MutexLock lock(&mu_);
  max_bytes_ = request.max_buffer_bytes != 0 ? request.max_buffer_bytes : kDefaultMaxBufferBytes;
  translator_.Reset(max_bytes_, offset, [api = &*api_](CUpti_CallbackDomain d, uint32_t cbid) {
    const char* name = nullptr;
    if (api->GetCallbackName == nullptr || api->GetCallbackName(d, cbid, &name) != CUPTI_SUCCESS ||
        name == nullptr) {
      return std::string();
    }
    return std::string(name);
  });
  buffers_in_flight_ = 0;
  return true;
}

void CuptiSource::SetAttributes() {
  // Best effort: older CUPTI lacks some attributes; capture goes on without.
  uint8_t per_thread = 1;
  size_t size = sizeof(per_thread);
  api_->ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
  size_t device_buffer = kDeviceBufferBytes;
  size = sizeof(device_buffer);
  api_->ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &device_buffer);
  size_t pool_limit = kDeviceBufferPoolLimit;
  size = sizeof(pool_limit);
  api_->ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &size, &pool_limit);
}

void CuptiSource::Start(int64_t window_start_ns) {
  window_start_ns_ = window_start_ns;
  if (!subscribed_ || activities_ == 0) return;
  {
    MutexLock lock(&mu_);
    accepting_ = true;
  }
  EnableKinds();
  if (host_only_) return;
  correlating_.store(true, std::memory_order_release);
}

void CuptiSource::EnableKinds() {
  std::string failures;
  for (const KindForActivity& k : kKinds) {
    if ((activities_ & k.activity) == 0) continue;
    const CUptiResult result = api_->ActivityEnable(k.kind);
    if (IsNoDevice(result)) {
      DisableKinds();
      host_only_ = true;
      message_ = "no usable CUDA device (" + ResultString(result) + ")";
      Release();
      return;
    }
    if (result != CUPTI_SUCCESS) {
      failures +=
          (failures.empty() ? "" : ", ") + ActivityNames(k.activity) + ": " + ResultString(result);
      continue;
    }
    enabled_ |= k.activity;
    enabled_kinds_.push_back(k.kind);
  }
  // Links kernels to the gpuctl range that launched them, and device
  // properties for occupancy (CUPTI may emit the latter only at context
  // creation); both best effort.
  for (CUpti_ActivityKind extra :
       {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_DEVICE}) {
    if (api_->ActivityEnable(extra) == CUPTI_SUCCESS) enabled_kinds_.push_back(extra);
  }
  if (!failures.empty()) message_ = "some GPU activity could not be enabled (" + failures + ")";
}

void CuptiSource::DisableKinds() {
  for (CUpti_ActivityKind kind : enabled_kinds_) api_->ActivityDisable(kind);
  enabled_kinds_.clear();
}

void CuptiSource::Stop(int64_t window_end_ns) {
  window_end_ns_ = window_end_ns;
  correlating_.store(false, std::memory_order_release);
  if (!subscribed_ || released_) return;
  DisableKinds();
  const CUptiResult flushed = api_->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (flushed != CUPTI_SUCCESS) {
    failed_ = true;
    message_ += (message_.empty() ? "" : "; ") + std::string("CUPTI failed during the window: ") +
                "cuptiActivityFlushAll: " + ResultString(flushed) +
                "; the trace holds the records delivered before";
  }
  {
    MutexLock lock(&mu_);
    accepting_ = false;
  }
  Release();
}

void CuptiSource::Release() {
  if (!subscribed_ || released_) return;
  released_ = true;
  release_.store(kReleasePending, std::memory_order_release);
  const bool armed =
      api_->EnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS &&
      api_->EnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS;
  // Without API callbacks there is no safe point: unsubscribe instead.
  if (!armed) SettleRelease();
}

void CUPTIAPI CuptiSource::OnApiCallback(void* self_ptr, CUpti_CallbackDomain domain,
                                         CUpti_CallbackId, const void* data) {
  auto* self = static_cast<CuptiSource*>(self_ptr);
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (static_cast<const CUpti_CallbackData*>(data)->callbackSite != CUPTI_API_EXIT) return;
  int expected = kReleasePending;
  if (!self->release_.compare_exchange_strong(expected, kReleaseFinalizing)) return;
  // cuptiFinalize detaches CUPTI (subscriber included) so the job runs at
  // full speed again; the next window subscribes afresh.
  self->api_->Finalize();
  self->finalizations_.fetch_add(1);
  self->release_.store(kReleaseIdle, std::memory_order_release);
}

void CUPTIAPI CuptiSource::OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  CuptiSource* self = g_active.load(std::memory_order_acquire);
  if (self == nullptr) return;
  MutexLock lock(&self->mu_);
  // Past the cap CUPTI gets no buffer: it drops and counts the records.
  if (!self->accepting_ || self->buffers_in_flight_ + self->buffer_bytes_ > self->max_bytes_) {
    return;
  }
  void* memory = std::aligned_alloc(8, self->buffer_bytes_);
  if (memory == nullptr) return;
  self->buffers_in_flight_ += self->buffer_bytes_;
  *buffer = static_cast<uint8_t*>(memory);
  *size = self->buffer_bytes_;
}

void CUPTIAPI CuptiSource::OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                             size_t size, size_t valid_size) {
  CuptiSource* self = g_active.load(std::memory_order_acquire);
  if (self != nullptr) self->TakeBuffer(context, stream_id, buffer, size, valid_size);
  std::free(buffer);
}

void CuptiSource::TakeBuffer(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                             size_t valid_size) {
  MutexLock lock(&mu_);
  buffers_in_flight_ -= std::min<uint64_t>(buffers_in_flight_, size);
  if (buffer != nullptr && valid_size > 0) {
    CUpti_Activity* record = nullptr;
    while (api_->ActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      translator_.Add(record);
    }
  }
  size_t dropped = 0;
  if (api_->ActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
    cupti_dropped_ += dropped;
  }
}

CollectStats CuptiSource::Collect(RecordWriter& writer) {
  CollectStats stats;
  if (activities_ == 0) return stats;
  CaptureInfoRecord info;
  info.activities = enabled_;
  info.flags = host_only_ ? records::kCaptureFlagHostOnly : 0;
  if (api_ && !host_only_) {
    info.flags |= records::kCaptureFlagCuptiActive;
    api_->GetVersion(&info.cupti_version);
  }
  if (failed_) info.flags |= records::kCaptureFlagCuptiFailed;
  {
    MutexLock lock(&mu_);
    translator_.Emit(writer, window_start_ns_, window_end_ns_);
    info.dropped_by_cupti = cupti_dropped_;
    info.dropped_at_cap = translator_.dropped_at_cap();
  }
  info.message = writer.InternString(message_);
  info.cupti_path = writer.InternString(api_ && !host_only_ ? api_->path : "");
  writer.Add(info);
  stats.dropped_events = info.dropped_by_cupti + info.dropped_at_cap;
  stats.cupti_dropped = info.dropped_by_cupti;
  stats.host_only = host_only_;
  // The payload's kCaptureInfo carries the bare reason; the result says
  // what it is.
  stats.message = host_only_ ? "host-only trace: " + message_ : message_;
  ResetWindow();
  return stats;
}

void CuptiSource::Abort() {
  correlating_.store(false, std::memory_order_release);
  if (subscribed_ && !released_) {
    DisableKinds();
    {
      MutexLock lock(&mu_);
      accepting_ = false;
    }
    if (!host_only_) api_->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    Release();
  }
  ResetWindow();
}

void CuptiSource::ResetInForkChild() {
  // The parent's CUPTI state is copied here but is not this process's to
  // use or release; a pending release is the parent's to carry out.
  fork_child_of_cupti_ =
      fork_child_of_cupti_ || cupti_attached_once_.load(std::memory_order_relaxed);
  correlating_.store(false, std::memory_order_relaxed);
  release_.store(kReleaseIdle, std::memory_order_relaxed);
  subscribed_ = released_ = false;
  subscriber_ = nullptr;
  CuptiSource* self = this;
  if (g_active.compare_exchange_strong(self, nullptr)) g_clock.store(nullptr);
  activities_ = enabled_ = 0;
  enabled_kinds_.clear();
  host_only_ = failed_ = false;
  message_.clear();
  if (!mu_.TryLock()) {
    // Held at the fork by a thread that does not exist here (a CUPTI
    // buffer thread mid-record): the records may be half-written, so they
    // are abandoned, not freed, and the lock is made anew.
    new (&mu_) Mutex;
    new (&translator_) ActivityTranslator;
    mu_.Lock();
  }
  accepting_ = false;
  buffers_in_flight_ = 0;
  cupti_dropped_ = 0;
  translator_.Reset(0, 0, nullptr);
  mu_.Unlock();
}

bool CuptiSource::OnRangePush(uint64_t range_id) {
  if (!correlating_.load(std::memory_order_acquire)) return false;
  return api_->ActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                                 range_id) == CUPTI_SUCCESS;
}

void CuptiSource::OnRangePop() {
  uint64_t last = 0;
  api_->ActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

}  // namespace gpuctl::client::cupti
