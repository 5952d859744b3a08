#include "daemon/hostctx/process_image.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

TEST(ParseMapsTest, KeepsTheFilesWithCodeAndTheVdso) {
  const std::vector<Mapping> mappings = ParseMaps(
      "55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 393231     /usr/bin/python3.11\n"
      "55d0c0a01000-55d0c0c00000 r-xp 00001000 fd:01 393231     /usr/bin/python3.11\n"
      "55d0c2000000-55d0c2100000 rw-p 00000000 00:00 0          [heap]\n"
      "7f1e20000000-7f1e28000000 r--s 00000000 fd:01 5555       /data/shard-0001.arrow\n"
      "7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 \n"
      "7f1e40001000-7f1e40002000 r-xp 00001000 08:02 77         /tmp/a dir/lib x.so (deleted)\n"
      "7ffd1cbf6000-7ffd1cbf8000 r-xp 00000000 00:00 0          [vdso]\n"
      "zzzz-1 r-xp 0 0:0 1 /bad\n");
  ASSERT_EQ(mappings.size(), 4u);
  EXPECT_EQ(mappings[0].path, "/usr/bin/python3.11");
  EXPECT_EQ(mappings[0].pgoff, 0u);
  EXPECT_EQ(mappings[1].start, 0x55d0c0a01000u);
  EXPECT_EQ(mappings[1].end, 0x55d0c0c00000u);
  EXPECT_EQ(mappings[1].pgoff, 0x1000u);
  EXPECT_EQ(mappings[1].dev_major, 0xfdu);
  EXPECT_EQ(mappings[1].dev_minor, 1u);
  EXPECT_EQ(mappings[1].inode, 393231u);
  EXPECT_EQ(mappings[2].path, "/tmp/a dir/lib x.so (deleted)");
  EXPECT_EQ(mappings[3].path, "[vdso]");
}

TEST(ProcessImageTest, SnapshotsALiveProcessAndSharesItsRoot) {
  std::vector<std::shared_ptr<const UniqueFd>> roots;
  const ProcessImage first = SnapshotProcess("/proc", getpid(), 7, 1 << 16, &roots);
  const ProcessImage second = SnapshotProcess("/proc", getpid(), 8, 1 << 16, &roots);
  ASSERT_NE(first.root, nullptr);
  EXPECT_EQ(first.root, second.root);
  EXPECT_EQ(roots.size(), 1u);
  EXPECT_EQ(first.namespace_pid, getpid());
  EXPECT_GT(first.start_ticks, 0u);
  EXPECT_EQ(first.start_ticks, StartTicksOf("/proc", getpid()));
  ASSERT_EQ(first.changes.size(), 1u);
  EXPECT_EQ(first.changes[0].time_ns, 7u);
  EXPECT_FALSE(first.changes[0].exec);
  EXPECT_GT(first.changes[0].mappings.size(), 2u);
  // At most the mappings asked for; a process that is gone has none.
  EXPECT_EQ(SnapshotProcess("/proc", getpid(), 9, 2, &roots).changes[0].mappings.size(), 2u);
  const ProcessImage gone = SnapshotProcess("/nonexistent", 1, 9, 1 << 16, &roots);
  EXPECT_EQ(gone.root, nullptr);
  EXPECT_TRUE(gone.changes.empty());
  EXPECT_EQ(StartTicksOf("/nonexistent", 1), 0u);
}

}  // namespace
}  // namespace gpuctl::hostctx
