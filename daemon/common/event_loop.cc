#include "daemon/common/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpuctl::daemon {
namespace {

// Watch id reserved for the wake eventfd.
constexpr uint64_t kWakeWatchId = 0;
constexpr int kMaxEventsPerWait = 64;

absl::Status ErrnoStatus(absl::string_view what, int err) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(err)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create() {
  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return ErrnoStatus("epoll_create1", errno);
  int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    int err = errno;
    close(epoll_fd);
    return ErrnoStatus("eventfd", err);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeWatchId;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) {
    int err = errno;
    close(wake_fd);
    close(epoll_fd);
    return ErrnoStatus("epoll_ctl(eventfd)", err);
  }
  return std::unique_ptr<EventLoop>(new EventLoop(epoll_fd, wake_fd));
}

EventLoop::EventLoop(int epoll_fd, int wake_fd) : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}

EventLoop::~EventLoop() {
  // Destroy queued tasks before the fds go: their captures may own objects
  // whose destructors post (and thus wake) once more.
  std::vector<Task> posted;
  {
    MutexLock lock(&mu_);
    posted.swap(posted_);
  }
  posted.clear();
  timers_.clear();
  watches_.clear();
  close(wake_fd_);
  close(epoll_fd_);
}

absl::Time EventLoop::MonotonicNow() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return absl::TimeFromTimespec(ts);
}

bool EventLoop::IsLoopThread() const {
  return loop_thread_.load(std::memory_order_acquire) == std::this_thread::get_id();
}

void EventLoop::AssertOwnerThread() const {
  // Before Run() and after it returns the loop belongs to whoever holds it.
  assert(loop_thread_.load(std::memory_order_acquire) == std::thread::id() || IsLoopThread());
}

void EventLoop::Wake() {
  uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the loop will wake anyway.
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

void EventLoop::Post(Task task) {
  bool was_empty;
  {
    MutexLock lock(&mu_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(task));
  }
  // The loop drains the eventfd before it takes the queue, so a non-empty
  // queue is always followed by a take.
  if (was_empty) Wake();
}

TaskRunner::TimerId EventLoop::PostDelayed(absl::Duration delay, Task task) {
  AssertOwnerThread();
  TimerId id = next_timer_id_++;
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  timer_heap_.push(TimerEntry{MonotonicNow() + delay, id});
  timers_.emplace(id, std::move(task));
  return id;
}

void EventLoop::Cancel(TimerId id) {
  AssertOwnerThread();
  // The heap entry stays and is skipped when it comes due.
  timers_.erase(id);
}

absl::Status EventLoop::AddFd(int fd, uint32_t events, FdCallback callback) {
  AssertOwnerThread();
  if (watch_by_fd_.contains(fd)) {
    return absl::AlreadyExistsError(absl::StrCat("fd ", fd, " is already watched"));
  }
  uint64_t id = next_watch_id_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return ErrnoStatus(absl::StrCat("epoll_ctl(ADD, ", fd, ")"), errno);
  }
  watches_.emplace(id, std::make_shared<Watch>(Watch{fd, std::move(callback)}));
  watch_by_fd_.emplace(fd, id);
  return absl::OkStatus();
}

absl::Status EventLoop::ModifyFd(int fd, uint32_t events) {
  AssertOwnerThread();
  auto it = watch_by_fd_.find(fd);
  if (it == watch_by_fd_.end()) {
    return absl::NotFoundError(absl::StrCat("fd ", fd, " is not watched"));
  }
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = it->second;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0) {
    return ErrnoStatus(absl::StrCat("epoll_ctl(MOD, ", fd, ")"), errno);
  }
  return absl::OkStatus();
}

void EventLoop::RemoveFd(int fd) {
  AssertOwnerThread();
  auto it = watch_by_fd_.find(fd);
  if (it == watch_by_fd_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  // A callback running right now keeps its Watch alive through its own
  // reference (see DispatchFdEvent).
  watches_.erase(it->second);
  watch_by_fd_.erase(it);
}

int EventLoop::NextTimeoutMs() const {
  {
    MutexLock lock(&mu_);
    if (!posted_.empty()) return 0;
  }
  if (timer_heap_.empty()) return -1;
  absl::Duration wait = timer_heap_.top().deadline - MonotonicNow();
  if (wait <= absl::ZeroDuration()) return 0;
  // Round up so a timer never fires early.
  int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1)));
  return ms > 1'000'000 ? 1'000'000 : static_cast<int>(ms);
}

void EventLoop::RunPostedTasks(bool drain_wake_fd) {
  if (drain_wake_fd) {
    uint64_t counter;
    [[maybe_unused]] ssize_t n = read(wake_fd_, &counter, sizeof(counter));
  }
  std::vector<Task> tasks;
  {
    MutexLock lock(&mu_);
    tasks.swap(posted_);
  }
  for (Task& task : tasks) {
    std::move(task)();
    // Destroy the task's captures here, in order, on the loop thread.
    task = nullptr;
  }
}

void EventLoop::RunDueTimers() {
  absl::Time now = MonotonicNow();
  while (!timer_heap_.empty() && timer_heap_.top().deadline <= now) {
    TimerId id = timer_heap_.top().id;
    timer_heap_.pop();
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;  // cancelled
    Task task = std::move(it->second);
    timers_.erase(it);
    std::move(task)();
    if (quit_.load(std::memory_order_acquire)) return;
  }
}

void EventLoop::DispatchFdEvent(uint64_t watch_id, uint32_t events) {
  auto it = watches_.find(watch_id);
  if (it == watches_.end()) return;  // removed by an earlier callback
  std::shared_ptr<Watch> watch = it->second;
  watch->callback(events);
}

void EventLoop::Run() {
  loop_thread_.store(std::this_thread::get_id(), std::memory_order_release);
  epoll_event events[kMaxEventsPerWait];
  while (!quit_.load(std::memory_order_acquire)) {
    int n = epoll_wait(epoll_fd_, events, kMaxEventsPerWait, NextTimeoutMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      // epoll_wait fails only on programming errors (EBADF, EINVAL).
      assert(false && "epoll_wait failed");
      break;
    }
    bool woken = false;
    for (int i = 0; i < n && !quit_.load(std::memory_order_acquire); ++i) {
      if (events[i].data.u64 == kWakeWatchId) {
        woken = true;
        continue;
      }
      DispatchFdEvent(events[i].data.u64, events[i].events);
    }
    if (quit_.load(std::memory_order_acquire)) break;
    RunDueTimers();
    if (quit_.load(std::memory_order_acquire)) break;
    RunPostedTasks(woken);
  }
  loop_thread_.store(std::thread::id(), std::memory_order_release);
  quit_.store(false, std::memory_order_release);
}

void EventLoop::Quit() {
  quit_.store(true, std::memory_order_release);
  Wake();
}

}  // namespace gpuctl::daemon
