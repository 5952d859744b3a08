#include "daemon/core/trace_session.h"

#include <cstdint>
#include <set>

#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

TraceSlot Slot(int32_t pid, int32_t rank, int32_t world_size) {
  TraceSlot slot;
  slot.info.set_pid(pid);
  slot.info.set_rank(rank);
  slot.info.set_world_size(world_size);
  return slot;
}

TEST(AnalysisRankTest, KnownRanksKeepTheirsAndUnknownOnesComeAfterTheWorld) {
  TraceSession session;
  session.slots = {Slot(10, 1, 4), Slot(11, -1, -1), Slot(12, 0, 4), Slot(13, -1, -1)};
  EXPECT_EQ(AnalysisRank(session, session.slots[0]), 1);
  EXPECT_EQ(AnalysisRank(session, session.slots[2]), 0);
  // Not 0 (rank 0's file has it), nor any rank of the world of 4.
  EXPECT_EQ(AnalysisRank(session, session.slots[1]), 4);
  EXPECT_EQ(AnalysisRank(session, session.slots[3]), 5);
}

TEST(AnalysisRankTest, WithoutAWorldSizeTheLargestKnownRankBounds) {
  TraceSession session;
  session.slots = {Slot(20, -1, -1), Slot(21, 6, -1)};
  EXPECT_EQ(AnalysisRank(session, session.slots[0]), 7);
}

TEST(AnalysisRankTest, OnlyUnknownRanksGetDistinctNumbersFromZero) {
  TraceSession session;
  session.slots = {Slot(30, -1, -1), Slot(31, -1, -1), Slot(32, -1, -1)};
  std::set<int32_t> seen;
  for (const TraceSlot& slot : session.slots) seen.insert(AnalysisRank(session, slot));
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1, 2}));
}

}  // namespace
}  // namespace gpuctl::daemon
