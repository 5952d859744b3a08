#ifndef GPUCTL_DAEMON_COMMON_EVENT_LOOP_H_
#define GPUCTL_DAEMON_COMMON_EVENT_LOOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"
#include "daemon/common/task_runner.h"

namespace gpuctl::daemon {

// The daemon's single event loop: epoll for file descriptors, an eventfd for
// tasks posted from other threads, and a min-heap of timers on the monotonic
// clock.
//
// Threading: Post() and Quit() may be called from any thread. Everything
// else (PostDelayed, Cancel, AddFd, ModifyFd, RemoveFd) runs on the thread
// inside Run(), or on any single thread before Run() starts / after it
// returned. Callbacks and tasks always run on the thread inside Run().
class EventLoop final : public TaskRunner {
 public:
  // Receives the epoll event mask (EPOLLIN, EPOLLOUT, EPOLLHUP, ...).
  using FdCallback = absl::AnyInvocable<void(uint32_t events)>;

  static absl::StatusOr<std::unique_ptr<EventLoop>> Create();
  ~EventLoop() override;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // TaskRunner. Posted tasks run in posting order.
  void Post(Task task) override;
  TimerId PostDelayed(absl::Duration delay, Task task) override;
  void Cancel(TimerId id) override;

  // Watches `fd` (level-triggered) until RemoveFd. The loop never closes
  // `fd`; the owner closes it after RemoveFd. RemoveFd may be called from
  // inside any callback, including the fd's own: no callback runs for a
  // removed fd afterwards, even for events already collected.
  absl::Status AddFd(int fd, uint32_t events, FdCallback callback);
  absl::Status ModifyFd(int fd, uint32_t events);
  void RemoveFd(int fd);

  // Runs until Quit(). Tasks still queued when it returns are destroyed
  // with the loop, unrun.
  void Run();
  void Quit();

  // True on the thread currently inside Run().
  bool IsLoopThread() const;

 private:
  struct Watch {
    int fd;
    FdCallback callback;
  };
  struct TimerEntry {
    absl::Time deadline;  // monotonic, see MonotonicNow()
    TimerId id;
    bool operator>(const TimerEntry& other) const {
      return deadline != other.deadline ? deadline > other.deadline : id > other.id;
    }
  };

  EventLoop(int epoll_fd, int wake_fd);
  static absl::Time MonotonicNow();
  void Wake();
  int NextTimeoutMs() const;
  void RunPostedTasks(bool drain_wake_fd);
  void RunDueTimers();
  void DispatchFdEvent(uint64_t watch_id, uint32_t events);
  void AssertOwnerThread() const;

  const int epoll_fd_;
  const int wake_fd_;
  std::atomic<bool> quit_{false};
  std::atomic<std::thread::id> loop_thread_{};

  // gpuctl::Mutex, not absl::Mutex: ThreadSanitizer sees pthread locks only
  // (docs/testing.md).
  mutable Mutex mu_;
  std::vector<Task> posted_ ABSL_GUARDED_BY(mu_);

  // Owner-thread state.
  TimerId next_timer_id_ = 1;
  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<>> timer_heap_;
  absl::flat_hash_map<TimerId, Task> timers_;
  // Keyed by a registration id (never reused) so that events collected for
  // an fd that was removed, closed and reused are not misdelivered.
  uint64_t next_watch_id_ = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Watch>> watches_;
  absl::flat_hash_map<int, uint64_t> watch_by_fd_;
};

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_COMMON_EVENT_LOOP_H_
