// A fake CUPTI for tests without a GPU. It defines the real C entry points
// (cuptiSubscribe, cuptiActivityEnable, ...) over an in-process state
// machine and delivers real CUPTI record structs (CUpti_ActivityKernel10,
// CUpti_ActivityMemcpy6, ...) through the registered buffer callbacks, the
// same path real CUPTI uses. Built two ways: linked into unit tests (with
// FakeCuptiApi() of fake_cupti_table.h) and as libcupti_fake.so, loaded by the real
// dlopen path through GPUCTL_CUPTI_PATH.
//
// Scenario (gpuctl_fake_cupti_reset, or GPUCTL_FAKE_CUPTI_SCENARIO at the
// first call): basic | multi_device | flood | subscriber_conflict |
// fail_mid_window | no_device | subscribe_unknown (cuptiSubscribe returns
// CUPTI_ERROR_UNKNOWN, as the real one does without a driver); what each
// does is in fake_cupti_scenarios.h. Generated records lie inside
// [first enable, flush] (by the registered timestamp callback), plus one
// kernel before and one after, an unknown record kind and noise API calls;
// with MEMORY2 and MEMORY_POOL enabled, device memory allocations, a
// release and pool records (AddDeviceMemory in fake_cupti_scenarios.cc).
#ifndef GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_H_
#define GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_H_

#include <cstdint>

extern "C" {

// Forgets all state and selects a scenario.
void gpuctl_fake_cupti_reset(const char* scenario);
// An application API call returning: runs the subscriber's callback with
// CUPTI_API_EXIT when the runtime domain is enabled. Returns 1 if it ran.
int gpuctl_fake_cupti_api_exit(void);
// A kernel launch on this thread: queues a runtime call, its kernel and,
// under a pushed CUSTOM0 id, an external correlation record, all delivered
// at the next flush.
void gpuctl_fake_cupti_launch_kernel(const char* name);
// Counters: "subscribe", "subscribe_failed", "unsubscribe", "finalize", "register_callbacks",
// "register_timestamp", "enable_without_timestamp", "flush", "ext_push", "ext_pop",
// "enable:<kind>", "enabled:<kind>" (1 while enabled), "attr:<attribute>" (last value),
// "domain:<domain>" (1 while enabled).
int64_t gpuctl_fake_cupti_count(const char* what);
// The id pushed last with cuptiActivityPushExternalCorrelationId (any
// thread), 0 if none.
uint64_t gpuctl_fake_cupti_last_external_id(void);

}  // extern "C"

#endif  // GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_H_
