// Test-only: whether this build's allocator survives fork() with other
// threads running.
//
// glibc's malloc takes its locks around fork(), so a child of a process
// whose threads were allocating can allocate at once. The AddressSanitizer
// runtimes of GCC 12 and of LLVM before 18 do not: a child forked while
// another thread is inside malloc can hang in its first allocation (seen
// as the child's new thread stuck in calloc under pthread_getattr_np), with
// or without gpuctl. A test that forks at an instant it does not control
// skips under those runtimes; the normal pass runs it.
#ifndef GPUCTL_CLIENT_LIB_SRC_FORK_SAFETY_FOR_TEST_H_
#define GPUCTL_CLIENT_LIB_SRC_FORK_SAFETY_FOR_TEST_H_

namespace gpuctl::client::testing {

#if defined(__SANITIZE_ADDRESS__)
#define GPUCTL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUCTL_TEST_ASAN 1
#endif
#endif

#if defined(GPUCTL_TEST_ASAN) && (!defined(__clang__) || __clang_major__ < 18)
inline constexpr bool kForkWhileAllocatingCanHang = true;
#else
inline constexpr bool kForkWhileAllocatingCanHang = false;
#endif

}  // namespace gpuctl::client::testing

#endif  // GPUCTL_CLIENT_LIB_SRC_FORK_SAFETY_FOR_TEST_H_
