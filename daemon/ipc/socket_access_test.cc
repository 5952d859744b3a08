#include "daemon/ipc/socket_access.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

TEST(ParseSocketModeTest, AcceptsOctalPermissionBits) {
  EXPECT_EQ(*ParseSocketMode("0660"), 0660u);
  EXPECT_EQ(*ParseSocketMode("660"), 0660u);
  EXPECT_EQ(*ParseSocketMode("0o600"), 0600u);
  EXPECT_EQ(*ParseSocketMode("0666"), 0666u);
  EXPECT_EQ(*ParseSocketMode("0777"), 0777u);
}

TEST(ParseSocketModeTest, RefusesAnythingElseNamingTheText) {
  for (const char* bad :
       {"", "66", "06600", "0680", "rw-rw----", "4660", "1660", "0060", "0400", "-660", "0x1b0"}) {
    absl::StatusOr<uint32_t> mode = ParseSocketMode(bad);
    ASSERT_FALSE(mode.ok()) << bad;
    EXPECT_EQ(mode.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(mode.status().message().find(absl::StrCat("\"", bad, "\"")), std::string::npos)
        << mode.status();
  }
  EXPECT_EQ(FormatSocketMode(0660), "0660");
}

TEST(ResolveIdsTest, NamesAndNumbers) {
  EXPECT_EQ(*ResolveGroup("0"), 0u);
  EXPECT_EQ(*ResolveGroup("root"), 0u);
  EXPECT_EQ(*ResolveGroup("4242"), 4242u);
  EXPECT_EQ(*ResolveUser("root"), 0u);
  EXPECT_EQ(*ResolveUser("1000"), 1000u);
  absl::StatusOr<gid_t> missing = ResolveGroup("no-such-group-gpuctl");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no group named \"no-such-group-gpuctl\""),
            std::string::npos);
  EXPECT_FALSE(ResolveUser("no-such-user-gpuctl").ok());
  EXPECT_FALSE(ResolveUser("4294967295").ok());  // (uid_t)-1 means "unchanged"
  EXPECT_FALSE(ResolveGroup("").ok());
  EXPECT_FALSE(ResolveGroup("a b").ok());
}

class SocketDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuctl-sockdir-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(SocketDirectoryTest, RefusesADirectoryOfAnotherUserButNotRoots) {
  // `owner` owns the directory; the daemon runs as `daemon`.
  uid_t owner = geteuid();
  if (owner == 0) {
    owner = 4321;
    ASSERT_EQ(chown(dir_.c_str(), owner, static_cast<gid_t>(-1)), 0);
  }
  const uid_t daemon = owner == 4321 ? 0 : owner + 1;
  absl::Status s = PrepareSocketDirectory(dir_, {}, daemon);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(absl::StrCat("belongs to uid ", owner)), std::string::npos) << s;
  EXPECT_TRUE(PrepareSocketDirectory(dir_, {}, owner).ok());
  EXPECT_TRUE(PrepareSocketDirectory("/", {}, daemon).ok());  // root's
}

TEST_F(SocketDirectoryTest, RefusesAPathThatIsNotADirectory) {
  std::string file = dir_ + "/file";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  EXPECT_EQ(PrepareSocketDirectory(file, {}, geteuid()).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SocketDirectoryTest, LeavesAnExistingDirectoryAsItIs) {
  ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);
  ASSERT_TRUE(PrepareSocketDirectory(dir_, {.group = getegid()}, geteuid()).ok());
  struct stat st {};
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u);
}

}  // namespace
}  // namespace gpuctl::daemon
