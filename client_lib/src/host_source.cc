#include "client_lib/src/host_source.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "gpuctl/v1/records.h"

namespace gpuctl::client {

struct OpenRange {
  std::string name;
  int64_t start_ns = 0;
  uint64_t id = 0;
  uint32_t depth = 0;
  bool kept = false;           // false: dropped at the cap or before the window; no event
  bool before_window = false;  // pushed before the window's start (armed ahead of it)
  bool correlated = false;     // the RangeListener took it
};

// Per-thread recording state. Written by its own thread while `writing` is
// set; read and emptied by the collector only after the window is closed
// and `writing` is clear.
struct ThreadBuffer {
  std::atomic<bool> writing{false};
  uint64_t window = 0;  // window this buffer is registered with (owner-written)
  HostSource* source GPUCTL_GUARDED_BY(HostSource::RegistryMutex()) = nullptr;
  uint32_t tid = 0;
  uint32_t next_range = 0;
  uint64_t overflow = 0;       // pushes beyond kMaxDepth, not on `stack`
  uint32_t before_window = 0;  // ranges at the bottom of `stack` pushed before the window
  uint64_t budget = 0;         // bytes of the cap reserved by this thread
  uint64_t dropped = 0;
  std::string thread_name;
  std::vector<HostEvent> events;
  std::vector<OpenRange> stack;

  ~ThreadBuffer();
};

namespace {

constexpr uint64_t kReserveChunk = 4096;

std::atomic<uint64_t> g_next_window{1};

// Trivially destructible, so it can be read after t_buffer is destroyed
// (annotation calls from other thread_local destructors).
thread_local bool t_buffer_destroyed = false;
thread_local ThreadBuffer t_buffer;

std::string CurrentThreadName() {
  char name[64] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return {};
  return name;
}

}  // namespace

ThreadBuffer::~ThreadBuffer() {
  t_buffer_destroyed = true;
  MutexLock lock(&HostSource::RegistryMutex());
  if (source != nullptr) source->OnThreadExitLocked(this);
}

HostSource::HostSource(AnnotationState* state, Clock* clock) : state_(state), clock_(clock) {}

HostSource::~HostSource() { Abort(); }

ThreadBuffer* HostSource::BeginWrite() {
  const uint64_t window = window_.load(std::memory_order_acquire);
  if (window == 0 || t_buffer_destroyed) return nullptr;
  ThreadBuffer* buffer = &t_buffer;
  if (buffer->window != window) {
    MutexLock lock(&RegistryMutex());
    if (!RegisterLocked(buffer, window)) return nullptr;
  }
  // Pairs with Stop(): either Stop sees `writing` and waits, or this thread
  // sees the window closed and leaves the buffer alone.
  buffer->writing.store(true, std::memory_order_seq_cst);
  if (window_.load(std::memory_order_seq_cst) != window) {
    buffer->writing.store(false, std::memory_order_release);
    return nullptr;
  }
  return buffer;
}

void HostSource::EndWrite(ThreadBuffer* buffer) {
  buffer->writing.store(false, std::memory_order_release);
}

bool HostSource::RegisterLocked(ThreadBuffer* buffer, uint64_t window) {
  if (window_.load(std::memory_order_relaxed) != window) return false;
  if (buffer->source != nullptr && buffer->source != this) {
    buffer->source->OnThreadExitLocked(buffer);
  }
  buffer->events.clear();
  buffer->stack.clear();
  buffer->overflow = 0;
  buffer->before_window = 0;
  buffer->budget = 0;
  buffer->dropped = 0;
  buffer->next_range = 0;
  buffer->tid = static_cast<uint32_t>(syscall(SYS_gettid));
  buffer->thread_name = CurrentThreadName();
  buffer->window = window;
  buffer->source = this;
  registered_.push_back(buffer);
  return true;
}

bool HostSource::Reserve(ThreadBuffer* buffer, uint64_t bytes) {
  if (buffer->budget < bytes) {
    uint64_t left = bytes_left_.load(std::memory_order_relaxed);
    uint64_t take = 0;
    do {
      take = std::min(std::max(kReserveChunk, bytes), left);
      if (buffer->budget + take < bytes) return false;
    } while (!bytes_left_.compare_exchange_weak(left, left - take, std::memory_order_relaxed));
    buffer->budget += take;
  }
  buffer->budget -= bytes;
  return true;
}

void HostSource::Push(const char* name) {
  ThreadBuffer* buffer = BeginWrite();
  if (buffer == nullptr) return;
  const int64_t now = clock_->RealtimeNs();
  if (buffer->stack.size() >= kMaxDepth) {
    ++buffer->overflow;
    ++buffer->dropped;
  } else if (now < window_start_ns_.load(std::memory_order_relaxed)) {
    // Armed ahead of its start: a range begun before the window is not
    // part of it, as if the window had opened at its start.
    OpenRange range;
    range.before_window = true;
    buffer->stack.push_back(std::move(range));
    ++buffer->before_window;
  } else {
    OpenRange range;
    range.kept = Reserve(buffer, records::kRangeSize);
    if (range.kept) {
      range.name = name != nullptr ? name : "";
      range.start_ns = now;
      range.id = (static_cast<uint64_t>(buffer->tid) << 32) | buffer->next_range++;
      range.depth = static_cast<uint32_t>(buffer->stack.size() - buffer->before_window);
      range.correlated = listener_ != nullptr && listener_->OnRangePush(range.id);
    } else {
      ++buffer->dropped;
    }
    buffer->stack.push_back(std::move(range));
  }
  EndWrite(buffer);
}

void HostSource::Pop() {
  ThreadBuffer* buffer = BeginWrite();
  if (buffer == nullptr) return;
  const int64_t now = clock_->RealtimeNs();
  if (buffer->overflow > 0) {
    --buffer->overflow;
  } else if (!buffer->stack.empty()) {
    OpenRange& top = buffer->stack.back();
    if (top.before_window) --buffer->before_window;
    if (top.correlated) listener_->OnRangePop();
    if (top.kept) {
      buffer->events.push_back(HostEvent{.is_range = true,
                                         .depth = top.depth,
                                         .start_ns = top.start_ns,
                                         .end_ns = now,
                                         .value = top.id,
                                         .name = std::move(top.name)});
    }
    buffer->stack.pop_back();
  }
  EndWrite(buffer);
}

void HostSource::RecordStep(uint64_t step, int64_t now_ns) {
  ThreadBuffer* buffer = BeginWrite();
  if (buffer == nullptr) return;
  if (now_ns < window_start_ns_.load(std::memory_order_relaxed)) {
    // Armed ahead of its start: not part of the window.
  } else if (Reserve(buffer, records::kStepSize)) {
    HostEvent event;
    event.start_ns = now_ns;
    event.value = step;
    buffer->events.push_back(std::move(event));
  } else {
    ++buffer->dropped;
  }
  EndWrite(buffer);
}

void HostSource::Step() {
  const int64_t now = clock_->RealtimeNs();
  RecordStep(MarkStep(*state_, now), now);
}

void HostSource::StepN(uint64_t step) {
  const int64_t now = clock_->RealtimeNs();
  MarkStepN(*state_, step, now);
  RecordStep(step, now);
}

bool HostSource::Prepare(const CaptureRequest& request, PrepareError* error) {
  Abort();
  max_buffer_bytes_ =
      request.max_buffer_bytes != 0 ? request.max_buffer_bytes : kDefaultMaxBufferBytes;
  return true;
}

void HostSource::Start(int64_t window_start_ns) {
  window_start_ns_.store(window_start_ns, std::memory_order_relaxed);
  bytes_left_.store(max_buffer_bytes_, std::memory_order_relaxed);
  window_.store(g_next_window.fetch_add(1, std::memory_order_relaxed), std::memory_order_seq_cst);
  state_->gate.fetch_or(kGateCapturing, std::memory_order_relaxed);
}

void HostSource::TakeLocked(ThreadBuffer* buffer, int64_t end_ns) {
  ThreadRecords records;
  records.tid = buffer->tid;
  records.thread_name = std::move(buffer->thread_name);
  // The window's end instant is chosen before the gate closes, so a thread may
  // record after it: events that begin after the end are dropped, ranges that
  // run past it are clipped there, and ranges still open are closed there
  // (innermost last). What came before the start of an armed window was
  // never recorded (Push, RecordStep).
  records.events.reserve(buffer->events.size() + buffer->stack.size());
  for (HostEvent& event : buffer->events) {
    if (event.start_ns > end_ns) continue;
    if (event.is_range && event.end_ns > end_ns) event.end_ns = end_ns;
    records.events.push_back(std::move(event));
  }
  for (OpenRange& open : buffer->stack) {
    if (!open.kept || open.start_ns > end_ns) continue;
    records.events.push_back(HostEvent{.is_range = true,
                                       .depth = open.depth,
                                       .start_ns = open.start_ns,
                                       .end_ns = end_ns,
                                       .value = open.id,
                                       .name = std::move(open.name)});
  }
  buffer->stack.clear();
  buffer->events.clear();
  dropped_ += buffer->dropped;
  buffer->dropped = 0;
  buffer->source = nullptr;
  if (!records.events.empty()) collected_.push_back(std::move(records));
}

void HostSource::StopRecording(int64_t window_end_ns) { Stop(window_end_ns); }

void HostSource::Stop(int64_t window_end_ns) {
  state_->gate.fetch_and(~kGateCapturing, std::memory_order_relaxed);
  window_.store(0, std::memory_order_seq_cst);
  MutexLock lock(&RegistryMutex());
  for (ThreadBuffer* buffer : registered_) {
    while (buffer->writing.load(std::memory_order_seq_cst)) sched_yield();
    TakeLocked(buffer, window_end_ns);
  }
  registered_.clear();
}

void HostSource::OnThreadExitLocked(ThreadBuffer* buffer) {
  auto it = std::find(registered_.begin(), registered_.end(), buffer);
  if (it == registered_.end()) return;
  registered_.erase(it);
  TakeLocked(buffer, clock_->RealtimeNs());
}

CollectStats HostSource::Collect(RecordWriter& writer) {
  CollectStats stats;
  MutexLock lock(&RegistryMutex());
  for (const ThreadRecords& thread : collected_) {
    if (!thread.thread_name.empty()) {
      writer.AddThreadName(thread.tid, writer.InternString(thread.thread_name));
    }
    for (const HostEvent& event : thread.events) {
      if (event.is_range) {
        writer.AddRange(thread.tid, event.start_ns, event.end_ns, writer.InternString(event.name),
                        event.depth, event.value);
      } else {
        writer.AddStep(thread.tid, event.start_ns, event.value);
      }
    }
  }
  stats.dropped_events = dropped_;
  collected_.clear();
  dropped_ = 0;
  return stats;
}

void HostSource::Abort() {
  Stop(clock_->RealtimeNs());
  MutexLock lock(&RegistryMutex());
  collected_.clear();
  dropped_ = 0;
}

void HostSource::ResetInForkChild() {
  // The other threads' buffers belong to threads that do not exist here;
  // forget them without touching them.
  registered_.clear();
  collected_.clear();
  dropped_ = 0;
  window_.store(0, std::memory_order_relaxed);
  // Runs on the thread that called fork(), the only thread of the child.
  if (!t_buffer_destroyed) t_buffer.source = nullptr;
  state_->gate.fetch_and(~kGateCapturing, std::memory_order_relaxed);
}

Mutex& HostSource::RegistryMutex() {
  static auto* mu = new Mutex;
  return *mu;
}

void HostSource::LockRegistryForFork() { RegistryMutex().Lock(); }
void HostSource::UnlockRegistryForFork() { RegistryMutex().Unlock(); }

}  // namespace gpuctl::client
