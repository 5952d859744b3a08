#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "client_lib/src/cupti/cupti_api.h"

namespace gpuctl::client::cupti {
namespace {

constexpr const char* kCuptiNames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
// Loaded libraries whose directory may hold (or lead to) the CUPTI that
// matches the process's CUDA.
constexpr std::string_view kCudaLibraryPrefixes[] = {"libcudart.so", "libcuda.so", "libcublas.so",
                                                     "libcublasLt.so", "libcupti.so"};

std::string_view Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view Dirname(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

bool IsCudaLibrary(std::string_view path) {
  const std::string_view base = Basename(path);
  for (std::string_view prefix : kCudaLibraryPrefixes) {
    if (base.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

void AddDirectory(std::string_view dir, std::vector<Candidate>* out) {
  if (dir.empty()) return;
  for (const char* name : kCuptiNames) {
    out->push_back({std::string(dir) + "/" + name, false});
  }
}

// Directories to search for a loaded CUDA library at `dir`: the directory
// itself; for a pip wheel (<site>/nvidia/<pkg>/lib) the cuda_cupti and cu13
// wheels beside it; for a toolkit (<root>/lib64) its extras/CUPTI/lib64.
std::vector<std::string> DirectoriesNextTo(std::string_view dir) {
  std::vector<std::string> dirs = {std::string(dir)};
  const std::string_view package_dir = Dirname(dir);  // <site>/nvidia/<pkg>
  const std::string_view nvidia_dir = Dirname(package_dir);
  if (Basename(dir) == "lib" && Basename(nvidia_dir) == "nvidia") {
    dirs.push_back(std::string(nvidia_dir) + "/cuda_cupti/lib");
    dirs.push_back(std::string(nvidia_dir) + "/cu13/lib");
  }
  if (Basename(dir) == "lib64" || Basename(dir) == "lib") {
    dirs.push_back(std::string(package_dir) + "/extras/CUPTI/lib64");
  }
  return dirs;
}

void AddUnique(std::vector<Candidate> from, std::vector<Candidate>* out) {
  for (Candidate& c : from) {
    bool seen = false;
    for (const Candidate& existing : *out) {
      seen = seen || (existing.path == c.path && existing.already_loaded == c.already_loaded);
    }
    if (!seen) out->push_back(std::move(c));
  }
}

template <typename Fn>
bool Resolve(const LoaderEnvironment& env, void* handle, const char* name, Fn* out) {
  void* address = env.symbol(handle, name);
  *out = reinterpret_cast<Fn>(address);
  return address != nullptr;
}

// Fills `api` from `handle`; returns the first missing required symbol, or
// nullptr.
const char* ResolveAll(const LoaderEnvironment& env, void* handle, CuptiApi* api) {
#define GPUCTL_REQUIRE(field, name) \
  if (!Resolve(env, handle, name, &api->field)) return name
  GPUCTL_REQUIRE(Subscribe, "cuptiSubscribe");
  GPUCTL_REQUIRE(Unsubscribe, "cuptiUnsubscribe");
  GPUCTL_REQUIRE(EnableDomain, "cuptiEnableDomain");
  GPUCTL_REQUIRE(Finalize, "cuptiFinalize");
  GPUCTL_REQUIRE(GetResultString, "cuptiGetResultString");
  GPUCTL_REQUIRE(GetVersion, "cuptiGetVersion");
  GPUCTL_REQUIRE(ActivityEnable, "cuptiActivityEnable");
  GPUCTL_REQUIRE(ActivityDisable, "cuptiActivityDisable");
  GPUCTL_REQUIRE(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
  GPUCTL_REQUIRE(ActivityFlushAll, "cuptiActivityFlushAll");
  GPUCTL_REQUIRE(ActivityGetNextRecord, "cuptiActivityGetNextRecord");
  GPUCTL_REQUIRE(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
  GPUCTL_REQUIRE(ActivitySetAttribute, "cuptiActivitySetAttribute");
  GPUCTL_REQUIRE(ActivityPushExternalCorrelationId, "cuptiActivityPushExternalCorrelationId");
  GPUCTL_REQUIRE(ActivityPopExternalCorrelationId, "cuptiActivityPopExternalCorrelationId");
  GPUCTL_REQUIRE(GetTimestamp, "cuptiGetTimestamp");
#undef GPUCTL_REQUIRE
  Resolve(env, handle, "cuptiActivityRegisterTimestampCallback",
          &api->ActivityRegisterTimestampCallback);
  Resolve(env, handle, "cuptiGetCallbackName", &api->GetCallbackName);
  return nullptr;
}

// Driver results that mean there is no device this process can use.
bool MeansNoDevice(CUresult result) {
  switch (result) {
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return true;
    default:
      return false;
  }
}

const char* KnownErrorName(CUresult result) {
  switch (result) {
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_SYSTEM_NOT_READY:
      return "CUDA_ERROR_SYSTEM_NOT_READY";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case CUDA_ERROR_UNKNOWN:
      return "CUDA_ERROR_UNKNOWN";
    default:
      return "CUDA error";
  }
}

// The loaded libcuda, opened by the path it was loaded from (RTLD_NOLOAD:
// never loads anything; by path, not by name, so no directory is
// searched).
void* OpenLoadedDriver(const LoaderEnvironment& env) {
  for (const std::string& object : env.loaded_objects()) {
    if (Basename(object).substr(0, 10) != "libcuda.so") continue;
    if (void* handle = env.open(object, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return handle;
  }
  return nullptr;
}

struct DriverApi {
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;

  // "cuInit: CUDA_ERROR_NO_DEVICE (100)".
  std::string Describe(const char* call, CUresult result) const {
    const char* name = nullptr;
    if (error_name == nullptr || error_name(result, &name) != CUDA_SUCCESS || name == nullptr) {
      name = KnownErrorName(result);  // a stub driver names nothing
    }
    return std::string(call) + ": " + name + " (" + std::to_string(static_cast<int>(result)) + ")";
  }
};

DeviceProbe Classify(const DriverApi& driver, const char* call, CUresult result) {
  DeviceProbe probe;
  probe.state =
      MeansNoDevice(result) ? DeviceProbe::State::kNoDevice : DeviceProbe::State::kUnknown;
  probe.detail = driver.Describe(call, result);
  return probe;
}

DeviceProbe CountDevices(const DriverApi& driver, bool may_initialize) {
  int count = 0;
  CUresult result = driver.device_count(&count);
  if (result == CUDA_ERROR_NOT_INITIALIZED) {
    if (!may_initialize) {
      return {DeviceProbe::State::kNotInitialized, 0, driver.Describe("cuDeviceGetCount", result)};
    }
    if (const CUresult init = driver.init(0); init != CUDA_SUCCESS) {
      return Classify(driver, "cuInit", init);
    }
    result = driver.device_count(&count);
  }
  if (result != CUDA_SUCCESS) return Classify(driver, "cuDeviceGetCount", result);
  if (count <= 0) return {DeviceProbe::State::kNoDevice, 0, "cuDeviceGetCount: 0 devices"};
  return {DeviceProbe::State::kUsable, count,
          "cuDeviceGetCount: " + std::to_string(count) + " device" + (count == 1 ? "" : "s")};
}

}  // namespace

DeviceProbe ProbeCudaDevices(const LoaderEnvironment& env, bool may_initialize) {
  void* handle = OpenLoadedDriver(env);
  if (handle == nullptr) {
    return {DeviceProbe::State::kDriverNotLoaded, 0, "libcuda.so.1 is not loaded"};
  }
  DriverApi driver;
  Resolve(env, handle, "cuGetErrorName", &driver.error_name);
  DeviceProbe probe;
  if (!Resolve(env, handle, "cuInit", &driver.init) ||
      !Resolve(env, handle, "cuDeviceGetCount", &driver.device_count)) {
    probe.detail = "the loaded libcuda has no cuInit or cuDeviceGetCount";
  } else {
    probe = CountDevices(driver, may_initialize);
  }
  // Only drops the reference RTLD_NOLOAD took; the driver stays loaded.
  env.close(handle);
  return probe;
}

bool LoadCudaDriver(const LoaderEnvironment& env, std::string* error) {
  if (env.open("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr) return true;
  *error = "libcuda.so.1 cannot be loaded";
  return false;
}

std::vector<Candidate> CuptiCandidates(const LoaderEnvironment& env) {
  std::vector<Candidate> out;
  for (const char* name : kCuptiNames) out.push_back({name, true});
  std::vector<Candidate> next_to_cuda;
  for (const std::string& object : env.loaded_objects()) {
    if (!IsCudaLibrary(object)) continue;
    for (const std::string& dir : DirectoriesNextTo(Dirname(object))) {
      AddDirectory(dir, &next_to_cuda);
    }
  }
  AddUnique(std::move(next_to_cuda), &out);
  if (std::optional<std::string> path = env.getenv("GPUCTL_CUPTI_PATH"); path && !path->empty()) {
    std::vector<Candidate> explicit_path;
    if (env.is_directory(*path)) {
      AddDirectory(*path, &explicit_path);
    } else {
      explicit_path.push_back({*path, false});
    }
    AddUnique(std::move(explicit_path), &out);
  }
  std::string cuda_home = env.getenv("CUDA_HOME").value_or("");
  if (cuda_home.empty()) cuda_home = "/usr/local/cuda";
  std::vector<Candidate> toolkit;
  AddDirectory(cuda_home + "/lib64", &toolkit);
  AddDirectory(cuda_home + "/extras/CUPTI/lib64", &toolkit);
  AddUnique(std::move(toolkit), &out);
  std::vector<Candidate> system;
  for (const char* name : kCuptiNames) system.push_back({name, false});
  AddUnique(std::move(system), &out);
  return out;
}

bool ProcessHasCuda(const LoaderEnvironment& env) {
  for (const std::string& object : env.loaded_objects()) {
    if (IsCudaLibrary(object)) return true;
  }
  return false;
}

std::optional<CuptiApi> LoadCuptiApi(const LoaderEnvironment& env, std::string* error) {
  std::string tried;
  for (const Candidate& candidate : CuptiCandidates(env)) {
    const int flags = RTLD_NOW | RTLD_LOCAL | (candidate.already_loaded ? RTLD_NOLOAD : 0);
    void* handle = env.open(candidate.path, flags);
    if (handle == nullptr) {
      // Not-yet-loaded probes are expected to miss; they are not reported.
      if (!candidate.already_loaded) tried += "\n  " + candidate.path + ": not found";
      continue;
    }
    CuptiApi api;
    if (const char* missing = ResolveAll(env, handle, &api)) {
      tried += "\n  " + candidate.path + ": no symbol " + missing;
      env.close(handle);
      continue;
    }
    api.path = candidate.path;
    // The handle is kept for the life of the process: CUPTI may run threads
    // and callbacks after a window, so it is never unloaded.
    return api;
  }
  *error = "CUPTI not found; tried:" + tried +
           "\n(set GPUCTL_CUPTI_PATH to libcupti.so or its directory)";
  return std::nullopt;
}

LoaderEnvironment ProcessLoaderEnvironment() {
  LoaderEnvironment env;
  env.getenv = [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  env.loaded_objects = [] {
    std::vector<std::string> objects;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
            static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
          }
          return 0;
        },
        &objects);
    return objects;
  };
  env.is_directory = [](const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  };
  env.open = [](const std::string& path, int flags) { return dlopen(path.c_str(), flags); };
  env.symbol = [](void* handle, const char* name) { return dlsym(handle, name); };
  env.close = [](void* handle) { dlclose(handle); };
  return env;
}

}  // namespace gpuctl::client::cupti
