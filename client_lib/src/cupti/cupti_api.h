// The CUPTI functions gpuctl uses, as one table of pointers: the only way
// the rest of the library reaches CUPTI. The real table is filled by
// LoadCuptiApi() from a dlopen'ed libcupti (never linked); tests fill it
// with the fake of client_lib/src/cupti/fake/.
//
// CUDA headers are included for the types and record structs only.
#ifndef GPUCTL_CLIENT_LIB_SRC_CUPTI_CUPTI_API_H_
#define GPUCTL_CLIENT_LIB_SRC_CUPTI_CUPTI_API_H_

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpuctl::client::cupti {

struct CuptiApi {
  // Required: a library without any of these is not used.
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*EnableDomain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) = nullptr;
  CUptiResult (*Finalize)() = nullptr;
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult (*GetVersion)(uint32_t*) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*ActivitySetAttribute)(CUpti_ActivityAttribute, size_t*, void*) = nullptr;
  CUptiResult (*ActivityPushExternalCorrelationId)(CUpti_ExternalCorrelationKind,
                                                   uint64_t) = nullptr;
  CUptiResult (*ActivityPopExternalCorrelationId)(CUpti_ExternalCorrelationKind,
                                                  uint64_t*) = nullptr;
  CUptiResult (*GetTimestamp)(uint64_t*) = nullptr;
  // Optional (older CUPTI lacks them); nullptr when absent.
  CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc) = nullptr;
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;

  // The file the table came from ("" for an in-process fake).
  std::string path;
};

// What the loader may look at, injected so tests can check the search
// order without touching the real process.
struct LoaderEnvironment {
  std::function<std::optional<std::string>(const char*)> getenv;
  // Paths of the shared objects loaded in the process.
  std::function<std::vector<std::string>()> loaded_objects;
  std::function<bool(const std::string&)> is_directory;
  // dlopen / dlsym; `flags` are dlopen's.
  std::function<void*(const std::string&, int flags)> open;
  std::function<void*(void* handle, const char* symbol)> symbol;
  std::function<void(void* handle)> close;
};

// The real process: getenv, dl_iterate_phdr, stat, dlopen/dlsym/dlclose.
LoaderEnvironment ProcessLoaderEnvironment();

// The dlopen candidates in search order: already loaded (RTLD_NOLOAD
// names), next to the process's CUDA libraries, GPUCTL_CUPTI_PATH,
// $CUDA_HOME or /usr/local/cuda, then the system search path.
struct Candidate {
  std::string path;
  bool already_loaded = false;  // tried with RTLD_NOLOAD
};
std::vector<Candidate> CuptiCandidates(const LoaderEnvironment& env);

// True when the process has loaded a CUDA library (libcuda, libcudart,
// libcublas, libcupti).
bool ProcessHasCuda(const LoaderEnvironment& env);

// What the CUDA driver already loaded in the process says about its
// devices.
struct DeviceProbe {
  enum class State {
    kUsable,           // at least one device
    kNoDevice,         // no usable device: none, a stub driver, no device node...
    kDriverNotLoaded,  // no libcuda in the process
    kNotInitialized,   // the driver is loaded but nobody called cuInit yet
    kUnknown,          // the driver answered something else (see detail)
  };
  State state = State::kUnknown;
  int devices = 0;
  // What the driver said, e.g. "cuInit: CUDA_ERROR_NO_DEVICE (100)".
  std::string detail;
};

// Asks the libcuda the process has already loaded (a loaded object named
// libcuda.so*, opened by its path with RTLD_NOLOAD: never loads the
// driver) for its device count.
// cuInit(0) is called only when `may_initialize` is true and the driver is
// not initialized yet; otherwise such a driver gives kNotInitialized.
DeviceProbe ProbeCudaDevices(const LoaderEnvironment& env, bool may_initialize);

// Loads libcuda.so.1 (RTLD_LAZY | RTLD_LOCAL; never unloaded: CUPTI would
// load it the same way). False, with `error` naming it, when the host has
// no driver to load.
bool LoadCudaDriver(const LoaderEnvironment& env, std::string* error);

// Loads the first candidate that opens and has every required symbol. On
// failure returns nullopt and sets `error` to a message naming each path
// tried and why it was not used.
std::optional<CuptiApi> LoadCuptiApi(const LoaderEnvironment& env, std::string* error);

}  // namespace gpuctl::client::cupti

#endif  // GPUCTL_CLIENT_LIB_SRC_CUPTI_CUPTI_API_H_
