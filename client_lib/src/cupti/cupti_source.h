// GPU activity through CUPTI, as an ActivitySource.
//
// Lifecycle per window (agent thread):
//   Prepare: load CUPTI (first time only; the table is kept), subscribe
//     (another subscriber -> BUSY, nothing replaced), register the
//     timestamp and buffer callbacks, set buffer attributes.
//   Start:   enable the asked activity kinds; gpuctl ranges start pushing
//     external correlation ids.
//   Stop:    disable the kinds, flush (forced), then ask for cuptiFinalize
//     at the next runtime/driver API exit (CUPTI's safe point), where the
//     callback calls it; if the next Prepare comes first, it unsubscribes
//     instead. Either way nothing is held once the job is back at work.
//   Collect: writes the records that overlap the window and a
//     kCaptureInfo record.
// Nothing is loaded and nothing runs outside windows.
//
// No usable GPU (no device, a stub driver, no driver at all) gives a
// host-only window: the capture succeeds with the host records and says
// why. Prepare asks the driver already loaded in the process (never loading
// or initializing it) before loading CUPTI, and again, allowed to call
// cuInit, when cuptiSubscribe fails; only a failure the driver does not
// explain is UNAVAILABLE.
//
// fork(): a child inherits a copy of the parent's CUPTI state, which is
// not its own to use. ResetInForkChild forgets the parent's window without
// calling CUPTI; a child of a process that had attached CUPTI records
// host-only windows (CUDA is not usable in the child of a process that
// initialized it).
//
// Threads: CUPTI delivers buffers on its own threads and the API-exit
// callback on application threads; the source is process-wide (CUPTI's
// buffer callbacks carry no context), so at most one CuptiSource may be
// prepared at a time in a process.
#ifndef GPUCTL_CLIENT_LIB_SRC_CUPTI_CUPTI_SOURCE_H_
#define GPUCTL_CLIENT_LIB_SRC_CUPTI_CUPTI_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "client_lib/src/activity_source.h"
#include "client_lib/src/clock.h"
#include "client_lib/src/cupti/activity_translator.h"
#include "client_lib/src/cupti/cupti_api.h"
#include "client_lib/src/host_source.h"
#include "client_lib/src/mutex.h"

namespace gpuctl::client::cupti {

class CuptiSource final : public ActivitySource, public RangeListener {
 public:
  static constexpr uint64_t kDefaultBufferBytes = 4ull << 20;
  static constexpr uint64_t kDefaultMaxBufferBytes = 128ull << 20;
  static constexpr uint64_t kMinBufferBytes = 64ull << 10;
  // CUPTI's device-side buffers: 4 MiB each, at most 8 per context, so a
  // capture takes at most ~32 MiB of GPU memory per context (CUPTI's
  // default pool may grow to hundreds of MiB).
  static constexpr size_t kDeviceBufferBytes = 4u << 20;
  static constexpr size_t kDeviceBufferPoolLimit = 8;

  struct Deps {
    Clock* clock = nullptr;
    // Loads the table; called at the first Prepare that needs CUPTI, again
    // after a failure.
    std::function<std::optional<CuptiApi>(std::string* error)> load;
    // Whether the process has loaded any CUDA library. When not, and
    // `force_load` is false, a window records host activity only.
    std::function<bool()> process_has_cuda;
    bool force_load = false;
    // Asks the loaded CUDA driver for its devices (ProbeCudaDevices); the
    // argument says whether it may call cuInit. Unset: nothing is known.
    std::function<DeviceProbe(bool may_initialize)> probe_devices;
    // Loads the CUDA driver (libcuda.so.1) when the process has not: CUPTI
    // needs one, and some CUPTI builds (PyTorch's 13.2 wheel among them)
    // crash on their first call on a host without it. False with the
    // reason when it cannot be loaded; CUPTI is then never loaded (unless
    // `force_load`). Unset: assumed loadable.
    std::function<bool(std::string* error)> load_driver;
  };

  explicit CuptiSource(Deps deps);
  ~CuptiSource() override;
  CuptiSource(const CuptiSource&) = delete;
  CuptiSource& operator=(const CuptiSource&) = delete;

  bool Prepare(const CaptureRequest& request, PrepareError* error) override;
  void Start(int64_t window_start_ns) override;
  void Stop(int64_t window_end_ns) override;
  CollectStats Collect(RecordWriter& writer) override;
  void Abort() override;

  bool OnRangePush(uint64_t range_id) override;
  void OnRangePop() override;

  // Fork child, only thread: forgets the parent's window, subscription and
  // pending release without calling CUPTI (its state here is a copy of the
  // parent's). Records a CUPTI thread was writing at the fork are abandoned
  // rather than freed.
  void ResetInForkChild();

  // Whether a cuptiFinalize is waiting for the next API exit (tests).
  bool finalize_pending() const { return release_.load() == kReleasePending; }
  uint64_t finalizations() const { return finalizations_.load(); }

 private:
  enum : int { kReleaseIdle, kReleasePending, kReleaseFinalizing };

  static void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                         size_t size, size_t valid_size);
  static void CUPTIAPI OnApiCallback(void* self, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                     const void* data);
  static uint64_t CUPTIAPI Timestamp();

  std::string ResultString(CUptiResult result) const;
  DeviceProbe ProbeDevices(bool may_initialize) const;
  // Prepare's end for a window without GPU activity: `reason` says why.
  bool PrepareHostOnly(std::string reason);
  // After cuptiSubscribe failed: host-only when the driver explains it,
  // else false with `error` set (BUSY or UNAVAILABLE).
  bool OnSubscribeFailed(CUptiResult result, PrepareError* error);
  // Waits for a finalize in progress; cancels a pending one (unsubscribes).
  void SettleRelease();
  void SetAttributes();
  void EnableKinds();
  void DisableKinds();
  // After the flush: finalize at the next API exit, or unsubscribe now.
  void Release();
  void TakeBuffer(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                  size_t valid_size);
  void ResetWindow();

  Deps deps_;
  std::optional<CuptiApi> api_;  // set once, never reset
  CUpti_SubscriberHandle subscriber_ = nullptr;
  // Agent thread only: subscribed and not yet handed to Release().
  bool subscribed_ = false;
  bool released_ = false;
  // Set from this process's first successful cuptiSubscribe (and during
  // each call); a fork child that inherits it set never calls CUPTI.
  std::atomic<bool> cupti_attached_once_{false};
  bool fork_child_of_cupti_ = false;  // agent thread, and the fork child handler
  std::atomic<int> release_{kReleaseIdle};
  std::atomic<uint64_t> finalizations_{0};
  std::atomic<bool> correlating_{false};

  // The window.
  uint32_t activities_ = 0;
  uint32_t enabled_ = 0;  // kinds actually enabled (kActivity* bits)
  std::vector<CUpti_ActivityKind> enabled_kinds_;
  bool host_only_ = false;
  bool failed_ = false;
  std::string message_;
  int64_t window_start_ns_ = 0;
  int64_t window_end_ns_ = 0;
  uint64_t buffer_bytes_ = kDefaultBufferBytes;

  Mutex mu_;  // the buffer path vs the agent thread
  ActivityTranslator translator_ GPUCTL_GUARDED_BY(mu_);
  uint64_t max_bytes_ GPUCTL_GUARDED_BY(mu_) = kDefaultMaxBufferBytes;
  uint64_t buffers_in_flight_ GPUCTL_GUARDED_BY(mu_) = 0;  // bytes
  uint64_t cupti_dropped_ GPUCTL_GUARDED_BY(mu_) = 0;
  bool accepting_ GPUCTL_GUARDED_BY(mu_) = false;
};

}  // namespace gpuctl::client::cupti

#endif  // GPUCTL_CLIENT_LIB_SRC_CUPTI_CUPTI_SOURCE_H_
