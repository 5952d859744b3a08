// The step counter page a Hello shares: descriptor checks, the read-only
// mapping and its life time, live reads.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/testing/notification.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/step_counter_page.h"
#include "daemon/ipc/testing/ipc_test_client.h"
#include "gmock/gmock.h"
#include "gpuctl/v1/step_page.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::daemon::testing::IpcTestClient;
using ::gpuctl::daemon::testing::kTestDeadline;
using ::gpuctl::testing::Notification;
using ::testing::_;
using ::testing::AllOf;
using ::testing::AtMost;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::NotNull;
using ::testing::Property;

constexpr int kGoodSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// A step page as the library makes it; the test keeps a writable mapping
// to move the counter.
class TestStepPage {
 public:
  TestStepPage(const std::string& name, size_t size, int seals) : name_(name) {
    fd_ = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(ftruncate(fd_, static_cast<off_t>(size)), 0);
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    EXPECT_NE(p, MAP_FAILED);
    page_ = static_cast<char*>(p);
    size_ = size;
    Store32(steps::kOffsetMagic, steps::kStepPageMagic);
    Store32(steps::kOffsetVersion, steps::kStepPageVersion);
    if (seals != 0) {
      EXPECT_EQ(fcntl(fd_, F_ADD_SEALS, seals), 0);
    }
  }
  ~TestStepPage() {
    if (fd_ >= 0) close(fd_);
    munmap(page_, size_);
  }
  // The descriptor, still owned here (to seal the page once written).
  int fd() const { return fd_; }
  // The descriptor to send (SendRaw closes it).
  int TakeFd() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Store32(uint32_t offset, uint32_t v) {
    // The page is the library's shared memory: its words are stored atomically in place.
    __atomic_store_n(reinterpret_cast<uint32_t*>(page_ + offset), v, __ATOMIC_RELAXED);  // NOLINT
  }
  void Store64(uint32_t offset, uint64_t v) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(page_ + offset), v, __ATOMIC_RELAXED);  // NOLINT
  }
  void Mark(uint64_t next_step, int64_t last_ns, int64_t period_ns) {
    Store64(steps::kOffsetNextStep, next_step);
    Store64(steps::kOffsetLastStepNs, static_cast<uint64_t>(last_ns));
    Store64(steps::kOffsetPeriodNs, static_cast<uint64_t>(period_ns));
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int fd_ = -1;
  char* page_ = nullptr;
  size_t size_ = 0;
};

// Mappings of the memfd named `name` in this process.
int CountMappings(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) n += line.find("memfd:" + name) != std::string::npos;
  return n;
}

// Open descriptors of this process on the memfd named `name`.
int CountFds(const std::string& name) {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) {
    char target[256] = {};
    std::string path = absl::StrCat("/proc/self/fd/", e->d_name);
    if (readlink(path.c_str(), target, sizeof(target) - 1) > 0 &&
        std::string(target).find("memfd:" + name) != std::string::npos) {
      ++n;
    }
  }
  closedir(dir);
  return n;
}

v1::ipc::ClientMessage StepHello(bool step_counter = true) {
  v1::ipc::ClientMessage msg;
  v1::ipc::Hello* hello = msg.mutable_hello();
  hello->set_protocol_major(1);
  hello->set_protocol_minor(1);
  hello->set_pid(getpid());
  hello->set_job_id("job-7");
  hello->set_rank(0);
  hello->add_labels("team=ml");
  hello->set_step_counter(step_counter);
  return msg;
}

class IpcStepCounterTest : public testing::IpcServerFixture {
 protected:
  void SetUp() override {
    IpcServerFixture::SetUp();
    StartServer(IpcServerOptions{});
    auto client = IpcTestClient::Connect(socket_path_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_.emplace(std::move(*client));
  }
  // Sends `msg` with `fds` and expects the Hello to be refused for `reason`
  // without the core hearing of it.
  void ExpectRefused(const v1::ipc::ClientMessage& msg, std::vector<int> fds,
                     absl::string_view reason) {
    EXPECT_CALL(core_, OnPeerHello(_, _, _, _)).Times(0);
    EXPECT_CALL(core_, OnPeerGone(_, _, _)).Times(0);
    auto lines = std::make_shared<std::vector<std::string>>();
    auto mu = std::make_shared<std::mutex>();
    SetLogSinkForTesting([lines, mu](absl::string_view line) {
      std::lock_guard<std::mutex> lock(*mu);
      lines->emplace_back(line);
    });
    ASSERT_TRUE(client_->Send(msg, std::move(fds)).ok());
    EXPECT_FALSE(client_->Receive().ok()) << "no HelloAck";
    EXPECT_TRUE(client_->WaitForClose());
    RunOnLoop([&] { EXPECT_EQ(server_->peer_count(), 0u); });
    SetLogSinkForTesting(nullptr);
    std::lock_guard<std::mutex> lock(*mu);
    EXPECT_THAT(*lines,
                Contains(AllOf(HasSubstr("dropping peer"), HasSubstr(std::string(reason)))));
  }
  std::optional<IpcTestClient> client_;
};

TEST_F(IpcStepCounterTest, SealedPageIsMappedReadOnlyAndReadLive) {
  TestStepPage page("gpuctl-step-good", steps::kStepPageBytes, kGoodSeals);
  page.Mark(8, 1704067200'000000000, 125'000'000);
  std::unique_ptr<StepCounterView> view;
  Notification accepted;
  Notification sent;  // the test's own copy of the descriptor is closed
  std::atomic<int> fds_during_hello{-1};
  EXPECT_CALL(core_, OnPeerHello(_, _, Property(&v1::ipc::Hello::step_counter, true), NotNull()))
      .WillOnce([&](PeerId, const PeerCredentials&, const v1::ipc::Hello& hello,
                    std::unique_ptr<StepCounterView> steps) {
        EXPECT_EQ(hello.labels_size(), 1);
        // The loop can run this before SendRaw has closed the sender's copy.
        EXPECT_TRUE(sent.WaitForNotificationWithTimeout(kTestDeadline));
        fds_during_hello = CountFds(page.name());
        view = std::move(steps);
        accepted.Notify();
        return absl::OkStatus();
      });
  EXPECT_CALL(core_, OnPeerGone(_, _, _)).Times(AtMost(1));
  ASSERT_TRUE(client_->Send(StepHello(), {page.TakeFd()}).ok());
  sent.Notify();
  auto ack = client_->Receive();
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->has_hello_ack());
  EXPECT_EQ(ack->hello_ack().protocol_minor(), kIpcProtocolMinor);
  ASSERT_TRUE(accepted.WaitForNotificationWithTimeout(kTestDeadline));
  EXPECT_EQ(fds_during_hello.load(), 0) << "the received descriptor is closed once mapped";
  EXPECT_EQ(CountMappings(page.name()), 2) << "the test's mapping and the daemon's";

  StepReading r = view->Read();
  ASSERT_TRUE(r.has_step);
  EXPECT_EQ(r.current_step, 7u);
  EXPECT_EQ(r.last_step_time, absl::FromUnixSeconds(1704067200));
  EXPECT_EQ(r.period, absl::Milliseconds(125));

  // The process marks more steps: the daemon sees them with no message.
  page.Mark(1001, 1704067260'000000000, 90'000'000);
  r = view->Read();
  EXPECT_EQ(r.current_step, 1000u);
  EXPECT_EQ(r.last_step_time, absl::FromUnixSeconds(1704067260));
  EXPECT_EQ(r.period, absl::Milliseconds(90));
  page.Store64(steps::kOffsetPeriodNs, static_cast<uint64_t>(-5));
  EXPECT_FALSE(view->Read().period.has_value()) << "a negative period is unknown";
  page.Store32(steps::kOffsetMagic, 0xdeadbeef);
  EXPECT_FALSE(view->Read().has_step) << "a page that is not a step page reads as none";

  view.reset();  // the core lets go when the process goes
  EXPECT_EQ(CountMappings(page.name()), 1) << "the daemon's mapping is gone";
}

TEST_F(IpcStepCounterTest, MissingSealsRefuseTheHello) {
  TestStepPage page("gpuctl-step-unsealed", steps::kStepPageBytes, F_SEAL_SHRINK | F_SEAL_GROW);
  ExpectRefused(StepHello(), {page.TakeFd()},
                "Hello refused: step counter memfd is not sealed against shrink, grow and sealing");
  EXPECT_EQ(CountMappings(page.name()), 1) << "never mapped";
  EXPECT_EQ(CountFds(page.name()), 0) << "closed";
}

TEST_F(IpcStepCounterTest, WrongSizeRefusesTheHello) {
  TestStepPage page("gpuctl-step-big", 2 * steps::kStepPageBytes, kGoodSeals);
  ExpectRefused(StepHello(), {page.TakeFd()}, "8192 bytes");
}

TEST_F(IpcStepCounterTest, AFileThatIsNotAMemfdRefusesTheHello) {
  std::string path = dir_ + "/not-a-memfd";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, steps::kStepPageBytes), 0);
  ExpectRefused(StepHello(), {fd}, "does not support seals");
}

TEST_F(IpcStepCounterTest, APipeRefusesTheHello) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  close(p[1]);
  ExpectRefused(StepHello(), {p[0]}, "not a regular file");
}

TEST_F(IpcStepCounterTest, AnnouncedCounterWithoutDescriptorRefusesTheHello) {
  ExpectRefused(StepHello(), {}, "carries no file descriptor");
}

TEST_F(IpcStepCounterTest, ADescriptorOnAHelloWithoutCounterDropsThePeer) {
  TestStepPage page("gpuctl-step-unannounced", steps::kStepPageBytes, kGoodSeals);
  ExpectRefused(StepHello(/*step_counter=*/false), {page.TakeFd()}, "unexpected file descriptor");
}

// The mapping checks on their own, with the reason each refusal gives.
TEST(MapStepCounterPageTest, ExplainsEachRefusal) {
  auto reason = [](int fd) {
    auto mapped = MapStepCounterPage(UniqueFd(fd));
    EXPECT_FALSE(mapped.ok());
    return std::string(mapped.status().message());
  };
  {
    TestStepPage page("gpuctl-step-r1", steps::kStepPageBytes, F_SEAL_SHRINK | F_SEAL_GROW);
    EXPECT_EQ(reason(page.TakeFd()),
              "step counter memfd is not sealed against shrink, grow and sealing (seals=0x6)");
  }
  {
    TestStepPage page("gpuctl-step-r2", 100, kGoodSeals);
    EXPECT_EQ(reason(page.TakeFd()), "step counter memfd holds 100 bytes, expected 4096");
  }
  {
    TestStepPage page("gpuctl-step-r3", steps::kStepPageBytes, kGoodSeals);
    auto mapped = MapStepCounterPage(UniqueFd(page.TakeFd()));
    ASSERT_TRUE(mapped.ok()) << mapped.status();
    EXPECT_FALSE((*mapped)->Read().has_step) << "next_step is 0: no step yet";
  }
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  close(p[1]);
  EXPECT_EQ(reason(p[0]), "step counter fd is not a regular file (memfd expected)");
}

// The mapping reads both page versions: the ring of a version 2 page, and
// a version 1 page as older libraries write it.
TEST(MapStepCounterPageTest, ReadsTheRingOfAVersionTwoPageAndAVersionOnePage) {
  TestStepPage current("gpuctl-step-v2", steps::kStepPageBytes, kGoodSeals);
  current.Mark(8, 1'000'000'000, 50);
  current.Store64(steps::kOffsetDurations, 40);
  current.Store64(steps::kOffsetDurations + 8, 60);
  current.Store64(steps::kOffsetDurationsWritten, 2);
  auto mapped = MapStepCounterPage(UniqueFd(current.TakeFd()));
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  StepReading r = (*mapped)->Read();
  EXPECT_EQ(r.current_step, 7u);
  EXPECT_EQ(r.durations_total, 2u);
  EXPECT_EQ(r.recent_durations,
            (std::vector<absl::Duration>{absl::Nanoseconds(40), absl::Nanoseconds(60)}));

  TestStepPage old("gpuctl-step-v1", steps::kStepPageBytes, 0);
  old.Store32(steps::kOffsetVersion, steps::kStepPageVersionWithoutRing);
  old.Mark(8, 1'000'000'000, 50);
  old.Store64(steps::kOffsetDurationsWritten, 99);  // not a field of version 1
  ASSERT_EQ(fcntl(old.fd(), F_ADD_SEALS, kGoodSeals), 0);
  mapped = MapStepCounterPage(UniqueFd(old.TakeFd()));
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  r = (*mapped)->Read();
  EXPECT_TRUE(r.has_step);
  EXPECT_EQ(r.current_step, 7u);
  EXPECT_EQ(r.period, absl::Nanoseconds(50));
  EXPECT_EQ(r.durations_total, 0u);
  EXPECT_TRUE(r.recent_durations.empty());
}

}  // namespace
}  // namespace gpuctl::daemon
