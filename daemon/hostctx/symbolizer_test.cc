#include "daemon/hostctx/symbolizer.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "daemon/hostctx/process_image.h"
#include "daemon/hostctx/testing/spin_workload.h"
#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

class FakeRoot {
 public:
  FakeRoot() {
    std::string pattern = ::testing::TempDir() + "/symroot.XXXXXX";
    dir_ = mkdtemp(pattern.data());
  }
  ~FakeRoot() { std::filesystem::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

TEST(SymbolizerTest, NamesJitFramesFromThePerfMapInTheProcessRoot) {
  FakeRoot proc;
  const std::string root = proc.dir() + "/4242/root";
  std::filesystem::create_directories(root + "/tmp");
  // In its own pid namespace the process is pid 7: its map is perf-7.map.
  std::ofstream(proc.dir() + "/4242/status") << "Name:\tpython3\nNSpid:\t4242\t7\n";
  std::ofstream(root + "/tmp/perf-7.map") << "7f0000001000 100 py::train_step:/app/train.py\n";
  Symbolizer symbolizer(proc.dir());
  EXPECT_TRUE(symbolizer.LoadProcess(4242));
  const Frame frame = symbolizer.Symbolize(4242, 0x7f0000001010, false);
  EXPECT_EQ(frame.function, "py::train_step:/app/train.py");
  EXPECT_EQ(frame.module, "[jit]");
  EXPECT_EQ(frame.offset, 0x10u);
  // A return address just past the function's end belongs to it.
  EXPECT_EQ(symbolizer.Symbolize(4242, 0x7f0000001100, true).function,
            "py::train_step:/app/train.py");
  const Frame unknown = symbolizer.Symbolize(4242, 0x1234, false);
  EXPECT_TRUE(unknown.function.empty());
  EXPECT_EQ(FrameLabel(unknown, 0x1234), "0x1234");
}

TEST(SymbolizerTest, APerfMapSymlinkCannotLeaveTheProcessRoot) {
  FakeRoot proc;
  const std::string root = proc.dir() + "/55/root";
  std::filesystem::create_directories(root + "/tmp");
  const std::string outside = proc.dir() + "/outside.map";
  std::ofstream(outside) << "1000 100 outside\n";
  std::filesystem::create_symlink(outside, root + "/tmp/perf-55.map");
  Symbolizer symbolizer(proc.dir());
  EXPECT_FALSE(symbolizer.LoadProcess(55));
  EXPECT_TRUE(symbolizer.Symbolize(55, 0x1010, false).function.empty());
}

TEST(SymbolizerTest, NamesNativeFunctionsOfALiveProcess) {
  Symbolizer symbolizer("/proc");
  ASSERT_TRUE(symbolizer.LoadProcess(getpid()));
  const auto address = reinterpret_cast<uint64_t>(&GpuctlHostctxSpinLeaf);  // NOLINT
  const Frame frame = symbolizer.Symbolize(getpid(), address + 4, false);
  EXPECT_EQ(frame.function, "GpuctlHostctxSpinLeaf");
  EXPECT_EQ(frame.offset, 4u);
  EXPECT_FALSE(frame.module.empty());
  EXPECT_EQ(FrameLabel(frame, address), "GpuctlHostctxSpinLeaf");
  // Cached: the same answer again.
  EXPECT_EQ(symbolizer.Symbolize(getpid(), address + 4, false).function, "GpuctlHostctxSpinLeaf");
}

TEST(SymbolizerTest, AProcessThatIsGoneYieldsUnnamedFrames) {
  Symbolizer symbolizer("/proc");
  EXPECT_FALSE(symbolizer.LoadProcess(0x3ffffff));
  const Frame frame = symbolizer.Symbolize(0x3ffffff, 0x401000, false);
  EXPECT_TRUE(frame.function.empty());
  EXPECT_TRUE(frame.module.empty());
  symbolizer.DropProcess(0x3ffffff);
}

// A process in a mount namespace of its own, with a /tmp no one else sees,
// writes its perf map there: the symbolizer finds it through the
// process's root, as it would in a container.
TEST(SymbolizerTest, ReadsThePerfMapInsideTheProcessMountNamespace) {
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  const pid_t child = fork();
  if (child == 0) {
    char status = 'n';  // no namespace
    if (unshare(CLONE_NEWNS) == 0 &&
        mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        mount("tmpfs", "/tmp", "tmpfs", 0, nullptr) == 0) {
      std::ofstream(absl::StrCat("/tmp/perf-", getpid(), ".map"))
          << "7f0000001000 100 LazyCompile:~step /app/train.js:3\n";
      status = 'r';
    }
    if (write(ready[1], &status, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  pollfd p{ready[0], POLLIN, 0};
  char status = 0;
  const bool answered = poll(&p, 1, 10000) == 1 && read(ready[0], &status, 1) == 1;
  close(ready[0]);
  const std::string host_path = absl::StrCat("/tmp/perf-", child, ".map");
  const bool visible_on_host = std::filesystem::exists(host_path);
  Symbolizer symbolizer("/proc");
  const bool loaded = status == 'r' && symbolizer.LoadProcess(child);
  const Frame frame = symbolizer.Symbolize(child, 0x7f0000001010, false);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_TRUE(answered);
  if (status != 'r') GTEST_SKIP() << "no mount namespace (needs CAP_SYS_ADMIN)";
  EXPECT_FALSE(visible_on_host);
  EXPECT_TRUE(loaded);
  EXPECT_EQ(frame.function, "LazyCompile:~step /app/train.js:3");
  EXPECT_EQ(frame.module, "[jit]");
}

TEST(FrameLabelTest, FallsBackToModuleAndOffset) {
  Frame frame;
  frame.module = "/usr/lib/libfoo.so";
  frame.offset = 0x1f;
  EXPECT_EQ(FrameLabel(frame, 0x7f00), "/usr/lib/libfoo.so+0x1f");
}

TEST(SpliceCallChainsTest, RestoresTheFramesAFramePointerWalkSkipped) {
  // The walk lost 0xb (the caller of a frameless leaf); the copy ended at 0xd.
  EXPECT_EQ(SpliceCallChains({0xa, 0xb, 0xc, 0xd}, {0xa, 0xc, 0xd, 0xe, 0xf}),
            (std::vector<uint64_t>{0xa, 0xb, 0xc, 0xd, 0xe, 0xf}));
  // No common frame: the deeper chain.
  EXPECT_EQ(SpliceCallChains({0xa, 0xb}, {0xa, 0x1, 0x2}), (std::vector<uint64_t>{0xa, 0x1, 0x2}));
  EXPECT_EQ(SpliceCallChains({0xa, 0xb, 0xc}, {0xa}), (std::vector<uint64_t>{0xa, 0xb, 0xc}));
  // A common frame that would cut a deeper unwound chain short: the latter.
  EXPECT_EQ(SpliceCallChains({0xa, 0xb, 0xc, 0xd, 0xe}, {0xa, 0xc, 0x9}),
            (std::vector<uint64_t>{0xa, 0xb, 0xc, 0xd, 0xe}));
  EXPECT_EQ(SpliceCallChains({}, {0xa, 0xb}), (std::vector<uint64_t>{0xa, 0xb}));
}

// The lines of this process's maps whose range holds `address`.
std::vector<Mapping> OwnMappingsAt(uintptr_t address) {
  std::ifstream maps("/proc/self/maps");
  std::vector<Mapping> out;
  for (std::string line; std::getline(maps, line);) {
    for (Mapping& mapping : ParseMaps(line)) {
      if (mapping.start <= address && address < mapping.end) out.push_back(std::move(mapping));
    }
  }
  return out;
}

// An image as a capture keeps it, for a process that is gone.
absl::flat_hash_map<pid_t, ProcessImage> ImageOf(pid_t pid, std::vector<Mapping> mappings) {
  ProcessImage image;
  image.root = std::make_shared<const UniqueFd>(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  image.changes.push_back({.time_ns = 1, .exec = false, .mappings = std::move(mappings)});
  absl::flat_hash_map<pid_t, ProcessImage> images;
  images.emplace(pid, std::move(image));
  return images;
}

// An executable mapping recorded alone (an mmap record: the file's first,
// read-only segment is not recorded) names its functions: the module's
// place comes from the ELF's program headers.
TEST(SymbolizerTest, NamesFramesOfAnExecutableMappingRecordedAlone) {
  const auto address = reinterpret_cast<uintptr_t>(&GpuctlHostctxSpinLeaf);  // NOLINT
  std::vector<Mapping> text = OwnMappingsAt(address);
  ASSERT_EQ(text.size(), 1u);
  ASSERT_NE(text[0].pgoff, 0u);
  Symbolizer symbolizer("/nonexistent", ImageOf(4243, text));
  EXPECT_EQ(symbolizer.Symbolize(4243, 0, address + 4, false).function, "GpuctlHostctxSpinLeaf");
}

// Mappings the capture missed (a ring that overflowed) are read from the
// process when it still runs, not from another that reused its pid.
TEST(SymbolizerTest, FillsWhatTheRecordsMissedFromTheProcessStillRunning) {
  const auto address = reinterpret_cast<uintptr_t>(&GpuctlHostctxSpinLeaf);  // NOLINT
  for (const bool same_process : {true, false}) {
    absl::flat_hash_map<pid_t, ProcessImage> images = ImageOf(getpid(), {});
    images[getpid()].start_ticks = StartTicksOf("/proc", getpid()) + (same_process ? 0 : 1);
    Symbolizer symbolizer("/proc", std::move(images));
    EXPECT_EQ(symbolizer.Symbolize(getpid(), 0, address + 4, false).function,
              same_process ? "GpuctlHostctxSpinLeaf" : "");
  }
}

// The [vdso] of a process gone since is named from the daemon's own
// image, wherever that process had it.
TEST(SymbolizerTest, NamesVdsoFramesFromTheDaemonsOwnImage) {
  void* vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (vdso == nullptr) GTEST_SKIP() << "no vDSO";
  const auto function = reinterpret_cast<uintptr_t>(dlsym(vdso, "__vdso_clock_gettime"));  // NOLINT
  ASSERT_NE(function, 0u);
  std::vector<Mapping> own = OwnMappingsAt(function);
  ASSERT_EQ(own.size(), 1u);
  ASSERT_EQ(own[0].path, "[vdso]");
  const uint64_t elsewhere = 0x7f0000000000;
  const uint64_t offset = function - own[0].start;
  own[0].end = elsewhere + (own[0].end - own[0].start);
  own[0].start = elsewhere;
  Symbolizer symbolizer("/nonexistent", ImageOf(4244, own));
  const Frame frame = symbolizer.Symbolize(4244, 0, elsewhere + offset, false);
  EXPECT_EQ(frame.module, "[vdso]");
  EXPECT_NE(frame.function.find("clock_gettime"), std::string::npos) << frame.function;

  // Of another size (another ABI's vDSO): named by its place.
  own[0].end += 0x1000;
  Symbolizer other("/nonexistent", ImageOf(4245, own));
  const Frame placed = other.Symbolize(4245, 0, elsewhere + offset, false);
  EXPECT_EQ(FrameLabel(placed, elsewhere + offset), absl::StrCat("[vdso]+0x", absl::Hex(offset)));
  dlclose(vdso);
}

}  // namespace
}  // namespace gpuctl::hostctx
