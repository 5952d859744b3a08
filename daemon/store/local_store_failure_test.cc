// The local store under failure: a writer killed at random points, a full
// disk, an unwritable directory.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "daemon/common/log.h"
#include "daemon/common/trace_id.h"
#include "daemon/store/local_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kFilesPerTrace = 3;

std::string MakeTempDir() {
  std::string tmpl = (fs::temp_directory_path() / "gpuctl-store-failure-XXXXXX").string();
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

// Self-describing content: "<trace>/<name> <size>\n" then a pattern, so a
// reader can tell a complete file from a cut one.
std::string Content(const std::string& trace_id, const std::string& name, size_t size) {
  std::string data = absl::StrCat(trace_id, "/", name, " ", size, "\n");
  // Byte i is 'a' + (i + seed) % 26.
  size_t seed = std::hash<std::string>()(data);
  std::string cycle(26, ' ');
  for (size_t k = 0; k < cycle.size(); ++k) cycle[k] = static_cast<char>('a' + (k + seed) % 26);
  data.reserve(size + cycle.size());
  while (data.size() < size) data.append(cycle, data.size() % 26);
  data.resize(size);
  return data;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Empty when `path` holds what Content() wrote for it; else what is wrong.
std::string CheckContent(const std::string& trace_id, const fs::path& path) {
  std::string data = ReadFile(path);
  size_t eol = data.find('\n');
  if (eol == std::string::npos) return absl::StrCat(path.string(), ": no header");
  std::vector<std::string> header = absl::StrSplit(data.substr(0, eol), ' ');
  size_t size = 0;
  if (header.size() != 2 || !absl::SimpleAtoi(header[1], &size)) {
    return absl::StrCat(path.string(), ": bad header");
  }
  if (header[0] != absl::StrCat(trace_id, "/", path.filename().string())) {
    return absl::StrCat(path.string(), ": belongs to ", header[0]);
  }
  if (data != Content(trace_id, path.filename().string(), size)) {
    return absl::StrCat(path.string(), ": ", data.size(), " of ", size, " bytes or corrupt");
  }
  return "";
}

std::string FileName(int i) { return absl::StrCat("h1-rank", i, "-pid", 100 + i, ".json.gz"); }

v1::TraceManifest ManifestFor(const std::string& id) {
  v1::TraceManifest m;
  m.set_trace_id(id);
  m.set_job_id("crash");
  for (int i = 0; i < kFilesPerTrace; ++i) m.add_results()->set_file(FileName(i));
  return m;
}

// Empty unless a file of the trace in `dir` is missing while its manifest
// is there. The manifest is seen before and after the file is found
// missing: it is never written again once deleted, so it was there all
// along, which the store must never allow (written last, deleted first).
std::string CheckManifestMeansWhole(const fs::path& dir) {
  const fs::path manifest = dir / "_gpuctl" / "unknown.json";
  if (!fs::exists(manifest)) return "";
  for (int i = 0; i < kFilesPerTrace; ++i) {
    if (!fs::exists(dir / FileName(i)) && fs::exists(manifest)) {
      return absl::StrCat(dir.string(), ": manifest without ", FileName(i));
    }
  }
  return "";
}

// What a reader may see in the store at any moment: every visible file
// complete; a trace with a manifest has all its files. Returns the
// problems found. `complete` gets the traces with a manifest, whose files
// are not written again, so not read again.
std::vector<std::string> CheckVisibleState(const std::string& root, LocalTraceStore& reader,
                                           std::set<std::string>* complete) {
  std::vector<std::string> problems;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(root, ec)) {
    std::string id = dir.path().filename().string();
    if (!IsValidTraceId(id)) continue;
    if (std::string problem = CheckManifestMeansWhole(dir.path()); !problem.empty()) {
      problems.push_back(problem);
    }
    if (complete->count(id) > 0) continue;
    for (const auto& file : fs::directory_iterator(dir.path(), ec)) {
      std::string name = file.path().filename().string();
      if (absl::StartsWith(name, ".tmp-") || name == "_gpuctl") continue;
      std::string problem = CheckContent(id, file.path());
      // A file deleted between listing and reading is fine.
      if (!problem.empty() && fs::exists(file.path())) problems.push_back(problem);
    }
    auto manifest = reader.GetManifest(id);
    if (!manifest.ok()) {
      if (!absl::IsNotFound(manifest.status())) problems.push_back(manifest.status().ToString());
      continue;
    }
    if (manifest->trace_id() != id) problems.push_back(absl::StrCat(id, ": wrong manifest"));
    complete->insert(id);
  }
  return problems;
}

// Safe to call while a writer runs: a directory that retention removes
// during the walk ends the walk instead of throwing.
std::vector<std::string> TempFiles(const std::string& dir) {
  std::vector<std::string> temps;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (absl::StartsWith(it->path().filename().string(), ".tmp-")) temps.push_back(it->path());
  }
  return temps;
}

// The writer keeps this many traces, so that it deletes as well as writes.
constexpr uint64_t kKeep = 4;

// As the daemon opens its store.
LocalStoreOptions WriterOptions() {
  LocalStoreOptions options;
  options.retention.max_count = kKeep;
  options.remove_incomplete = true;
  return options;
}

// Writes traces until killed, one progress byte per stored file; retention
// deletes the oldest after each.
[[noreturn]] void RunWriter(const std::string& root, int progress_fd) {
  SetMinLogLevel(LogLevel::kError);
  auto store = LocalTraceStore::Create(root, WriterOptions());
  if (!store.ok()) ::_exit(2);
  absl::BitGen gen;
  for (;;) {
    std::string id = GenerateTraceId(absl::Now(), gen);
    for (int i = 0; i < kFilesPerTrace; ++i) {
      size_t size = absl::Uniform<size_t>(gen, 100, 4 << 20);
      if (!(*store)->PutFile(id, FileName(i), Content(id, FileName(i), size)).ok()) ::_exit(3);
      if (::write(progress_fd, "f", 1) != 1) ::_exit(4);
    }
    if (!(*store)->PutManifest(ManifestFor(id)).ok()) ::_exit(5);
    if (::write(progress_fd, "m", 1) != 1) ::_exit(4);
  }
}

// Reads `n` progress bytes; false if the writer stops first or 30 s pass.
bool AwaitProgress(int fd, int n) {
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  char c;
  while (n > 0) {
    pollfd p{fd, POLLIN, 0};
    int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms <= 0 || ::poll(&p, 1, ms) != 1 || ::read(fd, &c, 1) != 1) return false;
    --n;
  }
  return true;
}

TEST(LocalStoreCrashTest, AKilledWriterLeavesNoPartialFileAndStartupCleansUp) {
  const std::string tmp = MakeTempDir();
  const std::string root = tmp + "/traces";
  auto observer = LocalTraceStore::Create(root);
  ASSERT_TRUE(observer.ok());
  absl::BitGen gen;
  std::set<std::string> complete;
  int killed_mid_write = 0;
  constexpr int kRounds = 16;
  for (int round = 0; round < kRounds; ++round) {
    int progress[2];
    ASSERT_EQ(::pipe(progress), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(progress[0]);
      RunWriter(root, progress[1]);
    }
    ::close(progress[1]);
    // A random point: after some stored files, then while the writer is
    // somewhere inside the next write, with the store read meanwhile.
    ASSERT_TRUE(AwaitProgress(progress[0], absl::Uniform(gen, 0, 6))) << "round " << round;
    int looks = absl::Uniform(gen, 0, 4);
    for (int i = 0; i < looks; ++i) {
      for (const std::string& p : CheckVisibleState(root, **observer, &complete))
        ADD_FAILURE() << p;
    }
    if (round % 2 == 0) {
      // Anywhere: between writes, or inside one.
      absl::Time until = absl::Now() + absl::Microseconds(absl::Uniform(gen, 0, 3000));
      while (absl::Now() < until) {
      }
    } else {
      // Inside a write: once its temporary file is there. How long building
      // the content takes (sanitizers slow it) cannot move the kill out of
      // the write this way.
      absl::Time deadline = absl::Now() + absl::Seconds(30);
      while (TempFiles(root).empty() && absl::Now() < deadline) {
      }
    }
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ::close(progress[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited with " << WEXITSTATUS(status);
    for (const std::string& p : CheckVisibleState(root, **observer, &complete)) ADD_FAILURE() << p;
    if (!TempFiles(root).empty()) ++killed_mid_write;
  }
  // Half the kills were aimed inside a write; a write that finished between
  // the look and the kill leaves no temporary file, but not all of them do.
  EXPECT_GT(killed_mid_write, 0);
  observer->reset();
  ASSERT_FALSE(complete.empty());

  // Restart: temporary files and incomplete traces (cut short while being
  // written or deleted) go; complete ones stay, each whole.
  auto store = LocalTraceStore::Create(root, WriterOptions());
  ASSERT_TRUE(store.ok());
  (*store)->EnforceRetention();
  std::set<std::string> on_disk;
  for (const auto& dir : fs::directory_iterator(root)) {
    on_disk.insert(dir.path().filename().string());
    std::set<std::string> names;
    for (const auto& file : fs::directory_iterator(dir.path())) {
      names.insert(file.path().filename().string());
    }
    EXPECT_EQ(names.size(), kFilesPerTrace + 1u) << dir.path();
    EXPECT_EQ(names.count("_gpuctl"), 1u) << dir.path();
    EXPECT_TRUE(fs::is_regular_file(dir.path() / "_gpuctl" / "unknown.json")) << dir.path();
    EXPECT_EQ(complete.count(dir.path().filename().string()), 1u) << dir.path();
  }
  EXPECT_FALSE(on_disk.empty());
  EXPECT_LE(on_disk.size(), kKeep);
  std::set<std::string> listed;
  v1::ListTracesRequest req;
  req.set_page_size(1000);
  auto page = (*store)->List(req);
  ASSERT_TRUE(page.ok());
  for (const auto& m : page->traces()) listed.insert(m.trace_id());
  EXPECT_EQ(listed, on_disk);
  std::set<std::string> checked;
  EXPECT_THAT(CheckVisibleState(root, **store, &checked), ::testing::IsEmpty());
  EXPECT_EQ(checked, on_disk);
  fs::remove_all(tmp);
}

class LocalStoreDiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = MakeTempDir();
    if (::mount("tmpfs", tmp_.c_str(), "tmpfs", 0, "size=1m,mode=0700") != 0) {
      int err = errno;
      fs::remove_all(tmp_);
      tmp_.clear();
      GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(err)
                   << "); RLIMIT_FSIZE covers the error path";
    }
    auto store = LocalTraceStore::Create(tmp_ + "/traces");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    if (tmp_.empty()) return;
    ::umount2(tmp_.c_str(), MNT_DETACH);
    fs::remove_all(tmp_);
  }

  std::string tmp_;
  std::unique_ptr<LocalTraceStore> store_;
  absl::BitGen gen_;
};

TEST_F(LocalStoreDiskFullTest, AFullDiskIsReportedAndTheStoreKeepsServing) {
  std::string id = GenerateTraceId(absl::Now(), gen_);
  std::string path = absl::StrCat(tmp_, "/traces/", id, "/big.json.gz");
  absl::Status st = store_->PutFile(id, "big.json.gz", std::string(2 << 20, 'x'));
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(st.message(), "no space left on device writing " + path);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_THAT(TempFiles(tmp_), ::testing::IsEmpty());
  EXPECT_EQ(store_->Find(id)->total_bytes, 0u);

  // Room for small things: the trace completes.
  ASSERT_TRUE(store_->PutFile(id, "small.json.gz", "small").ok());
  ASSERT_TRUE(store_->PutManifest(ManifestFor(id)).ok());

  // Fill the disk to the last byte, then complete another trace.
  std::string other = GenerateTraceId(absl::Now() + absl::Milliseconds(1), gen_);
  ASSERT_TRUE(store_->PutFile(other, "f.json.gz", "data").ok());
  {
    std::ofstream filler(tmp_ + "/filler", std::ios::binary);
    std::string block(4096, 'z');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  st = store_->PutManifest(ManifestFor(other));
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(st.message(), absl::StrCat("no space left on device writing ", tmp_, "/traces/", other,
                                       "/_gpuctl/unknown.json"));
  EXPECT_THAT(TempFiles(tmp_), ::testing::IsEmpty());
  st = store_->PutFile(GenerateTraceId(absl::Now() + absl::Milliseconds(2), gen_), "f", "x");
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;

  // Reads go on meanwhile, and writes once there is room again.
  v1::ListTracesRequest req;
  auto listed = store_->List(req);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->traces_size(), 1);
  EXPECT_EQ(listed->traces(0).trace_id(), id);
  auto reader = store_->Open(id, "small.json.gz");
  ASSERT_TRUE(reader.ok());
  fs::remove(tmp_ + "/filler");
  ASSERT_TRUE(store_->PutManifest(ManifestFor(other)).ok());
  EXPECT_EQ(store_->List(req)->traces_size(), 2);
}

TEST_F(LocalStoreDiskFullTest, AReadOnlyFileSystemIsPermissionDenied) {
  std::string id = GenerateTraceId(absl::Now(), gen_);
  ASSERT_TRUE(store_->PutFile(id, "f.json.gz", "data").ok());
  ASSERT_EQ(::mount(nullptr, tmp_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0)
      << std::strerror(errno);
  absl::Status st = store_->PutManifest(ManifestFor(id));
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_EQ(st.message(), absl::StrCat("read-only file system creating directory ", tmp_,
                                       "/traces/", id, "/_gpuctl"));
  std::string fresh = GenerateTraceId(absl::Now() + absl::Milliseconds(1), gen_);
  st = store_->PutFile(fresh, "f.json.gz", "data");
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat(tmp_, "/traces/", fresh)));
  auto reader = store_->Open(id, "f.json.gz");
  EXPECT_TRUE(reader.ok()) << reader.status();
}

// Works without privileges: the per-process file size limit makes write()
// fail (EFBIG) once SIGXFSZ is ignored.
TEST(LocalStoreFileSizeLimitTest, AWriteOverTheLimitIsResourceExhausted) {
  const std::string tmp = MakeTempDir();
  auto store = LocalTraceStore::Create(tmp + "/traces");
  ASSERT_TRUE(store.ok());
  absl::BitGen gen;
  std::string id = GenerateTraceId(absl::Now(), gen);
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &previous), 0);
  struct rlimit small = saved;
  small.rlim_cur = 64 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::Status big = (*store)->PutFile(id, "big.json.gz", std::string(1 << 20, 'x'));
  absl::Status fits = (*store)->PutFile(id, "small.json.gz", std::string(1000, 'x'));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  ASSERT_EQ(::sigaction(SIGXFSZ, &previous, nullptr), 0);

  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted) << big;
  EXPECT_EQ(big.message(),
            absl::StrCat("file size limit exceeded writing ", tmp, "/traces/", id, "/big.json.gz"));
  EXPECT_TRUE(fits.ok()) << fits;
  EXPECT_THAT(TempFiles(tmp), ::testing::IsEmpty());
  EXPECT_EQ((*store)->Find(id)->total_bytes, 1000u);
  fs::remove_all(tmp);
}

// Runs `fn` in a child process as an unprivileged user when this one is
// root (root writes anywhere); returns what `fn` returned.
std::string RunUnprivileged(const std::function<std::string()>& fn) {
  if (::geteuid() != 0) return fn();
  int out[2];
  if (::pipe(out) != 0) return "pipe failed";
  pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    std::string result = (::setgid(65534) == 0 && ::setuid(65534) == 0) ? fn() : "setuid failed";
    ssize_t n = ::write(out[1], result.data(), result.size());
    ::_exit(n == static_cast<ssize_t>(result.size()) ? 0 : 1);
  }
  ::close(out[1]);
  std::string result;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof(buf))) > 0) result.append(buf, n);
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return result;
}

TEST(LocalStorePermissionTest, AnUnwritableStoreIsPermissionDeniedNamingThePath) {
  const std::string tmp = MakeTempDir();
  ASSERT_EQ(::chmod(tmp.c_str(), 0755), 0);
  auto store = LocalTraceStore::Create(tmp + "/traces");
  ASSERT_TRUE(store.ok());
  absl::BitGen gen;
  std::string existing = GenerateTraceId(absl::Now(), gen);
  ASSERT_TRUE((*store)->PutFile(existing, "f.json.gz", "data").ok());
  std::string fresh = GenerateTraceId(absl::Now() + absl::Milliseconds(1), gen);
  ASSERT_EQ(::chmod((tmp + "/traces").c_str(), 0555), 0);
  ASSERT_EQ(::chmod((tmp + "/traces/" + existing).c_str(), 0555), 0);

  std::string result = RunUnprivileged([&] {
    absl::Status a = (*store)->PutFile(fresh, "f.json.gz", "data");
    absl::Status b = (*store)->PutManifest(ManifestFor(existing));
    return absl::StrCat(absl::StatusCodeToString(a.code()), ": ", a.message(), "\n",
                        absl::StatusCodeToString(b.code()), ": ", b.message());
  });
  EXPECT_EQ(result, absl::StrCat("PERMISSION_DENIED: permission denied creating directory ", tmp,
                                 "/traces/", fresh, "\n",
                                 "PERMISSION_DENIED: permission denied creating directory ", tmp,
                                 "/traces/", existing, "/_gpuctl"));
  ::chmod((tmp + "/traces").c_str(), 0750);
  ::chmod((tmp + "/traces/" + existing).c_str(), 0750);
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace gpuctl::daemon
