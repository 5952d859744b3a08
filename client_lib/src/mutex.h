#ifndef GPUCTL_CLIENT_LIB_SRC_MUTEX_H_
#define GPUCTL_CLIENT_LIB_SRC_MUTEX_H_

// Clang's thread-safety annotations for the client library, which cannot
// use abseil's (it links nothing but libc and libstdc++). They expand to
// nothing on other compilers.

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define GPUCTL_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GPUCTL_THREAD_ANNOTATION(x)
#endif

#define GPUCTL_CAPABILITY(x) GPUCTL_THREAD_ANNOTATION(capability(x))
#define GPUCTL_SCOPED_CAPABILITY GPUCTL_THREAD_ANNOTATION(scoped_lockable)
#define GPUCTL_GUARDED_BY(x) GPUCTL_THREAD_ANNOTATION(guarded_by(x))
#define GPUCTL_PT_GUARDED_BY(x) GPUCTL_THREAD_ANNOTATION(pt_guarded_by(x))
#define GPUCTL_REQUIRES(...) GPUCTL_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define GPUCTL_EXCLUDES(...) GPUCTL_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define GPUCTL_ACQUIRE(...) GPUCTL_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define GPUCTL_RELEASE(...) GPUCTL_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define GPUCTL_TRY_ACQUIRE(...) GPUCTL_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define GPUCTL_ASSERT_CAPABILITY(x) GPUCTL_THREAD_ANNOTATION(assert_capability(x))
#define GPUCTL_RETURN_CAPABILITY(x) GPUCTL_THREAD_ANNOTATION(lock_returned(x))
#define GPUCTL_NO_THREAD_SAFETY_ANALYSIS GPUCTL_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace gpuctl::client {

// A std::mutex the analysis understands (libstdc++'s carries no
// annotations). Constant-initialized and trivially destructible.
class GPUCTL_CAPABILITY("mutex") Mutex {
 public:
  constexpr Mutex() noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() GPUCTL_ACQUIRE() { mu_.lock(); }
  void Unlock() GPUCTL_RELEASE() { mu_.unlock(); }
  bool TryLock() GPUCTL_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis a lock it cannot follow is held; checks nothing.
  void AssertHeld() const GPUCTL_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class GPUCTL_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) GPUCTL_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() GPUCTL_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable over a Mutex. Waits take the held Mutex and return
// with it held again; wakeups may be spurious, so callers wait in a loop on
// their condition, which the analysis then checks under the lock.
class CondVar {
 public:
  void Wait(Mutex* mu) GPUCTL_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns false once `deadline` has passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<Clock, Duration> deadline) GPUCTL_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool signalled = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return signalled;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_MUTEX_H_
