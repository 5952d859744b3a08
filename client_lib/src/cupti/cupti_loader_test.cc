#include <dlfcn.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string_view>

#include "client_lib/src/cupti/cupti_api.h"

namespace gpuctl::client::cupti {
namespace {

// A process seen through the loader's eyes: environment, loaded objects,
// directories, and the files dlopen would find.
struct FakeProcess {
  std::map<std::string, std::string> env;
  std::vector<std::string> loaded;
  std::set<std::string> directories;
  std::set<std::string> files;            // openable paths
  std::set<std::string> already_loaded;   // names RTLD_NOLOAD finds
  std::set<std::string> missing_symbols;  // in every opened file
  std::vector<std::string> opened;        // every open call, in order
  int closes = 0;

  LoaderEnvironment Env() {
    LoaderEnvironment e;
    e.getenv = [this](const char* name) -> std::optional<std::string> {
      auto it = env.find(name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    e.loaded_objects = [this] { return loaded; };
    e.is_directory = [this](const std::string& p) { return directories.count(p) > 0; };
    e.open = [this](const std::string& path, int flags) -> void* {
      const bool noload = (flags & RTLD_NOLOAD) != 0;
      opened.push_back((noload ? "noload:" : "") + path);
      const bool found = noload ? already_loaded.count(path) > 0 : files.count(path) > 0;
      return found ? this : nullptr;
    };
    e.symbol = [this](void*, const char* name) -> void* {
      return missing_symbols.count(name) > 0 ? nullptr : this;
    };
    e.close = [this](void*) { ++closes; };
    return e;
  }
};

std::vector<std::string> Paths(const std::vector<Candidate>& candidates) {
  std::vector<std::string> out;
  for (const Candidate& c : candidates) out.push_back((c.already_loaded ? "noload:" : "") + c.path);
  return out;
}

TEST(CuptiLoaderTest, TheDriverIsLoadedByItsSonameAndKept) {
  FakeProcess without;
  std::string error;
  EXPECT_FALSE(LoadCudaDriver(without.Env(), &error));
  EXPECT_EQ(error, "libcuda.so.1 cannot be loaded");
  EXPECT_EQ(without.opened, std::vector<std::string>{"libcuda.so.1"});
  FakeProcess with;
  with.files = {"libcuda.so.1"};
  EXPECT_TRUE(LoadCudaDriver(with.Env(), &error));
  EXPECT_EQ(with.closes, 0);
}

TEST(CuptiLoaderTest, SearchOrderWithNothingSet) {
  FakeProcess p;
  EXPECT_EQ(
      Paths(CuptiCandidates(p.Env())),
      (std::vector<std::string>{
          "noload:libcupti.so.13", "noload:libcupti.so.12", "noload:libcupti.so",
          "/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.12",
          "/usr/local/cuda/lib64/libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
          "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.12",
          "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "libcupti.so.13", "libcupti.so.12",
          "libcupti.so"}));
}

TEST(CuptiLoaderTest, NextToLoadedCudaThenExplicitPathThenCudaHome) {
  FakeProcess p;
  p.loaded = {"/usr/lib/libc.so.6", "/venv/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13",
              "/venv/site-packages/torch/lib/libtorch.so"};
  p.env["GPUCTL_CUPTI_PATH"] = "/opt/cupti";
  p.directories.insert("/opt/cupti");
  p.env["CUDA_HOME"] = "/opt/cuda-13";
  const std::vector<std::string> paths = Paths(CuptiCandidates(p.Env()));
  auto index = [&](const std::string& path) {
    auto it = std::find(paths.begin(), paths.end(), path);
    EXPECT_NE(it, paths.end()) << path;
    return it - paths.begin();
  };
  const auto noload = index("noload:libcupti.so.13");
  const auto beside = index("/venv/site-packages/nvidia/cuda_runtime/lib/libcupti.so.13");
  const auto wheel = index("/venv/site-packages/nvidia/cuda_cupti/lib/libcupti.so.13");
  const auto cu13 = index("/venv/site-packages/nvidia/cu13/lib/libcupti.so.13");
  const auto explicit_dir = index("/opt/cupti/libcupti.so.13");
  const auto home = index("/opt/cuda-13/lib64/libcupti.so.13");
  const auto extras = index("/opt/cuda-13/extras/CUPTI/lib64/libcupti.so");
  const auto system = index("libcupti.so.13");
  EXPECT_LT(noload, beside);
  EXPECT_LT(beside, wheel);
  EXPECT_LT(wheel, cu13);
  EXPECT_LT(cu13, explicit_dir);
  EXPECT_LT(explicit_dir, home);
  EXPECT_LT(home, extras);
  EXPECT_LT(extras, system);
  EXPECT_EQ(std::count(paths.begin(), paths.end(), "/usr/local/cuda/lib64/libcupti.so.13"), 0);
  // libtorch is not a CUDA library: its directory is not searched.
  EXPECT_EQ(std::count(paths.begin(), paths.end(), "/venv/site-packages/torch/lib/libcupti.so"), 0);
}

TEST(CuptiLoaderTest, ExplicitFileIsTriedAsIs) {
  FakeProcess p;
  p.env["GPUCTL_CUPTI_PATH"] = "/build/lib/libcupti_fake.so";
  p.files.insert("/build/lib/libcupti_fake.so");
  std::string error;
  std::optional<CuptiApi> api = LoadCuptiApi(p.Env(), &error);
  ASSERT_TRUE(api.has_value()) << error;
  EXPECT_EQ(api->path, "/build/lib/libcupti_fake.so");
  EXPECT_NE(api->Subscribe, nullptr);
  EXPECT_EQ(p.opened.back(), "/build/lib/libcupti_fake.so");
}

TEST(CuptiLoaderTest, AlreadyLoadedCuptiWinsOverEverything) {
  FakeProcess p;
  p.already_loaded.insert("libcupti.so.12");
  p.files.insert("/usr/local/cuda/lib64/libcupti.so.13");
  std::string error;
  std::optional<CuptiApi> api = LoadCuptiApi(p.Env(), &error);
  ASSERT_TRUE(api.has_value());
  EXPECT_EQ(api->path, "libcupti.so.12");
  EXPECT_EQ(p.opened, (std::vector<std::string>{"noload:libcupti.so.13", "noload:libcupti.so.12"}));
}

TEST(CuptiLoaderTest, LibraryMissingASymbolIsSkipped) {
  FakeProcess p;
  p.files = {"/usr/local/cuda/lib64/libcupti.so.13", "libcupti.so"};
  p.missing_symbols = {"cuptiFinalize"};
  std::string error;
  EXPECT_FALSE(LoadCuptiApi(p.Env(), &error).has_value());
  EXPECT_NE(error.find("/usr/local/cuda/lib64/libcupti.so.13: no symbol cuptiFinalize"),
            std::string::npos)
      << error;
  EXPECT_EQ(p.closes, 2);
}

TEST(CuptiLoaderTest, OptionalSymbolsMayBeMissing) {
  FakeProcess p;
  p.files = {"libcupti.so.13"};
  p.missing_symbols = {"cuptiActivityRegisterTimestampCallback", "cuptiGetCallbackName"};
  std::string error;
  std::optional<CuptiApi> api = LoadCuptiApi(p.Env(), &error);
  ASSERT_TRUE(api.has_value()) << error;
  EXPECT_EQ(api->ActivityRegisterTimestampCallback, nullptr);
  EXPECT_EQ(api->GetCallbackName, nullptr);
}

TEST(CuptiLoaderTest, NothingFoundListsEveryPathTried) {
  FakeProcess p;
  p.env["GPUCTL_CUPTI_PATH"] = "/nowhere/libcupti.so";
  std::string error;
  EXPECT_FALSE(LoadCuptiApi(p.Env(), &error).has_value());
  for (const char* path :
       {"/nowhere/libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "\n  libcupti.so.13"}) {
    EXPECT_NE(error.find(path), std::string::npos) << path << " in " << error;
  }
  EXPECT_NE(error.find("GPUCTL_CUPTI_PATH"), std::string::npos);
}

TEST(CuptiLoaderTest, CudaPresenceFromLoadedObjects) {
  FakeProcess p;
  p.loaded = {"/lib/x86_64-linux-gnu/libc.so.6"};
  EXPECT_FALSE(ProcessHasCuda(p.Env()));
  p.loaded.push_back("/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_TRUE(ProcessHasCuda(p.Env()));
}

// A CUDA driver for ProbeCudaDevices: what its entry points return, and
// what they were asked.
struct FakeDriver {
  CUresult before_init = CUDA_ERROR_NOT_INITIALIZED;  // cuDeviceGetCount before cuInit
  CUresult init = CUDA_SUCCESS;
  int devices = 1;
  bool initialized = false;
  int init_calls = 0;
};
FakeDriver* g_driver = nullptr;

CUresult FakeInit(unsigned int) {
  ++g_driver->init_calls;
  g_driver->initialized = g_driver->init == CUDA_SUCCESS;
  return g_driver->init;
}
CUresult FakeDeviceGetCount(int* count) {
  if (!g_driver->initialized) return g_driver->before_init;
  *count = g_driver->devices;
  return CUDA_SUCCESS;
}
CUresult FakeGetErrorName(CUresult result, const char** name) {
  switch (result) {
    case CUDA_ERROR_NO_DEVICE:
      *name = "CUDA_ERROR_NO_DEVICE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_STUB_LIBRARY:
      *name = "CUDA_ERROR_STUB_LIBRARY";
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

class ProbeTest : public ::testing::Test {
 protected:
  void SetUp() override { g_driver = &driver_; }
  void TearDown() override { g_driver = nullptr; }

  LoaderEnvironment Env() {
    LoaderEnvironment e = process_.Env();
    e.symbol = [](void*, const char* name) -> void* {
      const std::string_view n(name);
      if (n == "cuInit") return reinterpret_cast<void*>(&FakeInit);
      if (n == "cuDeviceGetCount") return reinterpret_cast<void*>(&FakeDeviceGetCount);
      if (n == "cuGetErrorName") return reinterpret_cast<void*>(&FakeGetErrorName);
      return nullptr;
    };
    return e;
  }

  // The driver as the process loaded it.
  void LoadDriver(const std::string& path = "/usr/lib/x86_64-linux-gnu/libcuda.so.1") {
    process_.loaded.push_back(path);
    process_.already_loaded.insert(path);
  }

  FakeProcess process_;
  FakeDriver driver_;
};

TEST_F(ProbeTest, NeverLoadsTheDriver) {
  process_.loaded = {"/lib/libc.so.6", "/usr/local/cuda/lib64/libcudart.so.13"};
  process_.files.insert("/usr/lib/x86_64-linux-gnu/libcuda.so.1");  // installed, not loaded
  DeviceProbe probe = ProbeCudaDevices(Env(), /*may_initialize=*/true);
  EXPECT_EQ(probe.state, DeviceProbe::State::kDriverNotLoaded);
  EXPECT_EQ(probe.detail, "libcuda.so.1 is not loaded");
  EXPECT_EQ(driver_.init_calls, 0);
  EXPECT_TRUE(process_.opened.empty());
}

TEST_F(ProbeTest, OpensTheLoadedDriverByItsPathWithoutLoading) {
  process_.loaded = {"/lib/libc.so.6"};
  LoadDriver("/opt/stubs/libcuda.so");
  driver_.initialized = true;
  DeviceProbe probe = ProbeCudaDevices(Env(), false);
  EXPECT_EQ(probe.state, DeviceProbe::State::kUsable);
  EXPECT_EQ(probe.detail, "cuDeviceGetCount: 1 device");
  EXPECT_EQ(process_.opened, std::vector<std::string>{"noload:/opt/stubs/libcuda.so"});
  EXPECT_EQ(process_.closes, 1);  // the reference NOLOAD took, nothing more
}

TEST_F(ProbeTest, UninitializedDriverIsLeftAloneUnlessAllowed) {
  LoadDriver();
  driver_.devices = 2;
  DeviceProbe probe = ProbeCudaDevices(Env(), /*may_initialize=*/false);
  EXPECT_EQ(probe.state, DeviceProbe::State::kNotInitialized);
  EXPECT_EQ(driver_.init_calls, 0);
  probe = ProbeCudaDevices(Env(), /*may_initialize=*/true);
  EXPECT_EQ(probe.state, DeviceProbe::State::kUsable);
  EXPECT_EQ(probe.devices, 2);
  EXPECT_EQ(driver_.init_calls, 1);
}

TEST_F(ProbeTest, StubDriverMeansNoDeviceWithoutInitializing) {
  LoadDriver();
  driver_.before_init = CUDA_ERROR_STUB_LIBRARY;  // what the toolkit's stub says
  DeviceProbe probe = ProbeCudaDevices(Env(), false);
  EXPECT_EQ(probe.state, DeviceProbe::State::kNoDevice);
  EXPECT_EQ(probe.detail, "cuDeviceGetCount: CUDA_ERROR_STUB_LIBRARY (34)");
  EXPECT_EQ(driver_.init_calls, 0);
}

TEST_F(ProbeTest, NoDeviceFromCuInitOrAZeroCount) {
  LoadDriver();
  driver_.init = CUDA_ERROR_NO_DEVICE;
  DeviceProbe probe = ProbeCudaDevices(Env(), true);
  EXPECT_EQ(probe.state, DeviceProbe::State::kNoDevice);
  EXPECT_EQ(probe.detail, "cuInit: CUDA_ERROR_NO_DEVICE (100)");

  driver_ = FakeDriver{};
  driver_.devices = 0;
  probe = ProbeCudaDevices(Env(), true);
  EXPECT_EQ(probe.state, DeviceProbe::State::kNoDevice);
  EXPECT_EQ(probe.detail, "cuDeviceGetCount: 0 devices");
}

TEST_F(ProbeTest, OtherDriverErrorsAreNotCalledNoDevice) {
  LoadDriver();
  driver_.init = CUDA_ERROR_UNKNOWN;
  DeviceProbe probe = ProbeCudaDevices(Env(), true);
  EXPECT_EQ(probe.state, DeviceProbe::State::kUnknown);
  // Named even though the driver names nothing (a stub does not).
  EXPECT_EQ(probe.detail, "cuInit: CUDA_ERROR_UNKNOWN (999)");
  driver_ = FakeDriver{};
  driver_.init = CUDA_ERROR_OUT_OF_MEMORY;
  probe = ProbeCudaDevices(Env(), true);
  EXPECT_EQ(probe.state, DeviceProbe::State::kUnknown);
  EXPECT_EQ(probe.detail, "cuInit: CUDA error (2)");
}

TEST(CuptiLoaderTest, RealProcessEnvironmentSeesThisProcess) {
  LoaderEnvironment env = ProcessLoaderEnvironment();
  bool libc = false;
  for (const std::string& object : env.loaded_objects()) {
    libc = libc || object.find("libc.so") != std::string::npos;
  }
  EXPECT_TRUE(libc);
  EXPECT_TRUE(env.is_directory("/"));
  EXPECT_FALSE(ProcessHasCuda(env));
  // No driver here: the probe says so and loads nothing.
  EXPECT_EQ(ProbeCudaDevices(env, true).state, DeviceProbe::State::kDriverNotLoaded);
  EXPECT_FALSE(ProcessHasCuda(env));
}

}  // namespace
}  // namespace gpuctl::client::cupti
