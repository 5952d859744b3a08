// Host annotations (gpuctl_range_push/pop, gpuctl_step) as an
// ActivitySource.
//
// Threads: Push/Pop/Step/StepN/RecordStep are called from any application
// thread, in practice only while the gate is non-zero (the API checks it
// first); outside a window they record nothing.
// Each thread records into its own thread_local buffer, registered with the
// open window under a process-wide mutex at its first event in that window;
// no lock is taken per event. The ActivitySource methods run on the agent
// thread. Stop() closes the window and waits for threads caught mid-event
// (a few instructions) before it takes their records.
#ifndef GPUCTL_CLIENT_LIB_SRC_HOST_SOURCE_H_
#define GPUCTL_CLIENT_LIB_SRC_HOST_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "client_lib/src/activity_source.h"
#include "client_lib/src/annotation_state.h"
#include "client_lib/src/clock.h"
#include "client_lib/src/mutex.h"

namespace gpuctl::client {

struct ThreadBuffer;

// One recorded host event, before encoding.
struct HostEvent {
  bool is_range = false;
  uint32_t depth = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // ranges only
  uint64_t value = 0;  // range id, or step number
  std::string name;    // ranges only
};

// The records one thread made in one window.
struct ThreadRecords {
  uint32_t tid = 0;
  std::string thread_name;
  std::vector<HostEvent> events;
};

// Told of each range a window records, so GPU work launched inside it can
// be linked to it (CUPTI external correlation). Called on the annotating
// thread; must be cheap and never block.
class RangeListener {
 public:
  virtual ~RangeListener() = default;
  // Returns true when it took the range; OnRangePop is then called at the
  // matching pop on the same thread, and only then.
  virtual bool OnRangePush(uint64_t range_id) = 0;
  virtual void OnRangePop() = 0;
};

class HostSource final : public ActivitySource {
 public:
  // Deepest range nesting recorded per thread; deeper pushes are dropped
  // and counted, and their pops matched.
  static constexpr uint32_t kMaxDepth = 256;
  // Used when a request carries no cap.
  static constexpr uint64_t kDefaultMaxBufferBytes = 64ull << 20;

  // `state` and `clock` must outlive this source.
  HostSource(AnnotationState* state, Clock* clock);
  ~HostSource() override;
  HostSource(const HostSource&) = delete;
  HostSource& operator=(const HostSource&) = delete;

  void Push(const char* name);
  void Pop();
  // Marks the next step on the counters and records it.
  void Step();
  // Marks `step` on the counters and records it.
  void StepN(uint64_t step);
  // Records the mark of `step` made at `now_ns` (the counters already
  // updated by the caller).
  void RecordStep(uint64_t step, int64_t now_ns);

  // Set before any window opens; `listener` must outlive this source.
  void set_range_listener(RangeListener* listener) { listener_ = listener; }

  bool Prepare(const CaptureRequest& request, PrepareError* error) override;
  void Start(int64_t window_start_ns) override;
  // Closes the window (as Stop does): a few atomic stores, then a short
  // wait for threads caught mid-event. Stop after it finds nothing to do.
  void StopRecording(int64_t window_end_ns) override;
  void Stop(int64_t window_end_ns) override;
  CollectStats Collect(RecordWriter& writer) override;
  void Abort() override;

  // Fork child: the window (if any) and all parent threads' buffers are
  // forgotten without touching them. Called with the registry lock held
  // (see LockRegistryForFork).
  void ResetInForkChild() GPUCTL_REQUIRES(RegistryMutex());

  // The process-wide registry mutex, taken around fork() so no child is
  // born with it held.
  static void LockRegistryForFork() GPUCTL_ACQUIRE(RegistryMutex());
  static void UnlockRegistryForFork() GPUCTL_RELEASE(RegistryMutex());

  // Thread-exit hook (registry lock held): keeps the records of a thread
  // that exits inside the window.
  void OnThreadExitLocked(ThreadBuffer* buffer) GPUCTL_REQUIRES(RegistryMutex());

  // Process-wide: guards every source's registered_ and collected_, and
  // each ThreadBuffer's `source`. Leaked: threads may exit (and unregister)
  // during static destruction.
  static Mutex& RegistryMutex();

 private:
  // Returns the calling thread's buffer registered with the open window, and
  // marks it as being written; nullptr when no window is open. Pair with
  // EndWrite.
  ThreadBuffer* BeginWrite();
  void EndWrite(ThreadBuffer* buffer);
  bool RegisterLocked(ThreadBuffer* buffer, uint64_t window) GPUCTL_REQUIRES(RegistryMutex());
  // Reserves `bytes` of the window's cap for the calling thread.
  bool Reserve(ThreadBuffer* buffer, uint64_t bytes);
  // Moves a buffer's records (open ranges closed at `end_ns`) into
  // collected_. Registry lock held.
  void TakeLocked(ThreadBuffer* buffer, int64_t end_ns) GPUCTL_REQUIRES(RegistryMutex());

  AnnotationState* const state_;
  Clock* const clock_;
  RangeListener* listener_ = nullptr;
  // Id of the open window, 0 when closed. Ids are unique process-wide.
  std::atomic<uint64_t> window_{0};
  std::atomic<uint64_t> bytes_left_{0};
  uint64_t max_buffer_bytes_ = kDefaultMaxBufferBytes;
  // The window's start instant. Start may come before it (an armed time
  // window): ranges pushed and steps marked before it are left out. Atomic:
  // application threads read it.
  std::atomic<int64_t> window_start_ns_{0};
  std::vector<ThreadBuffer*> registered_ GPUCTL_GUARDED_BY(RegistryMutex());
  std::vector<ThreadRecords> collected_ GPUCTL_GUARDED_BY(RegistryMutex());
  uint64_t dropped_ GPUCTL_GUARDED_BY(RegistryMutex()) = 0;
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_HOST_SOURCE_H_
