// The step counter shared with gpuctld (proto/gpuctl/v1/step_page.h): one
// page in a memfd, sealed against shrink, grow and further sealing, mapped
// read-write here; the agent passes its descriptor with every Hello so the
// daemon can map it read-only and read each process's current step without
// a message.
//
// The page is created when the runtime is (library init) and again in a
// fork child: the child's inherited mapping is the parent's page, so the
// child moves to a page of its own, carrying the inherited values over,
// before any of its code can mark a step. Where memfd or sealing is not
// available the counter stays in the process's private memory and no
// descriptor is sent (Hello.step_counter = false).
//
// Threads: Install/Uninstall by the runtime's owner; ReinstallInForkChild
// in the fork child handler (one thread exists there). None allocates.
#ifndef GPUCTL_CLIENT_LIB_SRC_STEP_COUNTER_PAGE_H_
#define GPUCTL_CLIENT_LIB_SRC_STEP_COUNTER_PAGE_H_

#include "client_lib/src/annotation_state.h"

namespace gpuctl::client {

class StepCounterPage {
 public:
  StepCounterPage() = default;
  ~StepCounterPage() = default;  // Uninstall first: the state may point here
  StepCounterPage(const StepCounterPage&) = delete;
  StepCounterPage& operator=(const StepCounterPage&) = delete;

  // Creates the page and moves `state`'s counter onto it, values carried
  // over. A step marked by another thread while the counter moves may be
  // lost; at library load no other thread exists.
  void Install(AnnotationState* state);
  // Fork child: drops the parent's page (never written here) and installs
  // a fresh one, or the private counters when that fails.
  void ReinstallInForkChild(AnnotationState* state);
  // Moves the counter back to `state`'s private counters and frees the
  // page. No other thread may be marking steps.
  void Uninstall(AnnotationState* state);

  // The memfd to send with Hello; -1 when the counter is private.
  int fd() const { return fd_; }

 private:
  bool Create();
  void Release();

  int fd_ = -1;
  void* mapping_ = nullptr;
};

// Moves `state`'s counter to `to` (values copied) and returns the counters
// it was on.
StepCounters* MoveStepCounters(AnnotationState* state, StepCounters* to);

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_STEP_COUNTER_PAGE_H_
