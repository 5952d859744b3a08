#include "daemon/ipc/inline_assembly.h"

#include <memory>
#include <string>
#include <vector>

#include "daemon/common/testing/fake_clock.h"
#include "daemon/common/testing/fake_task_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::ipc::CaptureResult Announce(const std::string& trace_id, uint64_t bytes) {
  v1::ipc::CaptureResult result;
  result.set_trace_id(trace_id);
  result.set_transport(v1::ipc::PAYLOAD_TRANSPORT_INLINE);
  result.set_payload_size(bytes);
  return result;
}

v1::ipc::PayloadChunk Chunk(const std::string& trace_id, uint64_t offset, const std::string& data) {
  v1::ipc::PayloadChunk chunk;
  chunk.set_trace_id(trace_id);
  chunk.set_offset(offset);
  chunk.set_data(data);
  return chunk;
}

class InlineAssemblerTest : public ::testing::Test {
 protected:
  testing::FakeClock clock_;
  testing::FakeTaskRunner loop_{&clock_};
  std::vector<PeerId> admitted_;
  // The core's ingest budget, which the assembler reserves in.
  IngestAdmission budget_{100};
  std::unique_ptr<InlineAssembler> assembler_ = std::make_unique<InlineAssembler>(
      &budget_, &loop_, [this](PeerId peer) { admitted_.push_back(peer); });
};

TEST_F(InlineAssemblerTest, ReassemblesChunksInOrder) {
  ASSERT_TRUE(assembler_->Begin(1, Announce("t", 6)));
  v1::ipc::CaptureResult result;
  auto partial = assembler_->AddChunk(1, Chunk("t", 0, "abc"), &result);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(*partial, nullptr);
  auto done = assembler_->AddChunk(1, Chunk("t", 3, "def"), &result);
  ASSERT_TRUE(done.ok());
  ASSERT_NE(*done, nullptr);
  EXPECT_EQ(std::string((*done)->bytes().begin(), (*done)->bytes().end()), "abcdef");
  EXPECT_EQ(result.trace_id(), "t");
  EXPECT_FALSE(assembler_->HasPending(1));
  EXPECT_EQ(budget_.running_bytes(), 6u) << "held until the payload is dropped";
  done->reset();
  loop_.RunUntilIdle();
  EXPECT_EQ(budget_.running_bytes(), 0u);
}

TEST_F(InlineAssemblerTest, RefusesChunksThatDoNotAddUp) {
  v1::ipc::CaptureResult result;
  EXPECT_THAT(assembler_->AddChunk(1, Chunk("t", 0, "a"), &result).status().message(),
              HasSubstr("without an inline CaptureResult"));
  ASSERT_TRUE(assembler_->Begin(1, Announce("t", 4)));
  EXPECT_THAT(assembler_->AddChunk(1, Chunk("u", 0, "a"), &result).status().message(),
              HasSubstr("another trace"));
  EXPECT_THAT(assembler_->AddChunk(1, Chunk("t", 2, "a"), &result).status().message(),
              HasSubstr("at offset 2, expected 0"));
  EXPECT_THAT(assembler_->AddChunk(1, Chunk("t", 0, "abcde"), &result).status().message(),
              HasSubstr("does not fit the announced 4 bytes"));
  EXPECT_THAT(assembler_->AddChunk(1, Chunk("t", 0, ""), &result).status().message(),
              HasSubstr("does not fit"));
}

TEST_F(InlineAssemblerTest, APayloadWaitsForRoomAndIsAdmittedWhenAnotherIsAbandoned) {
  ASSERT_TRUE(assembler_->Begin(1, Announce("a", 80)));
  EXPECT_FALSE(assembler_->Begin(2, Announce("b", 80)));
  EXPECT_EQ(budget_.waiting_count(), 1u);
  EXPECT_THAT(admitted_, ElementsAre(1));
  assembler_->Abandon(1);
  EXPECT_THAT(admitted_, ElementsAre(1, 2));
  EXPECT_EQ(budget_.running_bytes(), 80u);
  EXPECT_EQ(budget_.waiting_count(), 0u);
  assembler_->Abandon(2);
  EXPECT_EQ(budget_.running_bytes(), 0u);
}

TEST_F(InlineAssemblerTest, HandsOnThePayloadWithTheEntryThatCountsIt) {
  ASSERT_TRUE(assembler_->Begin(1, Announce("t", 3)));
  v1::ipc::CaptureResult result;
  auto done = assembler_->AddChunk(1, Chunk("t", 0, "abc"), &result);
  ASSERT_TRUE(done.ok());
  ASSERT_NE(*done, nullptr);
  const uint64_t entry = (*done)->ingest_id();
  EXPECT_TRUE(budget_.IsRunning(entry));
  // The core releases it after converting; the payload's own release when
  // it is dropped later does nothing more.
  budget_.Release(entry);
  ASSERT_TRUE(assembler_->Begin(2, Announce("u", 90)));
  done->reset();
  loop_.RunUntilIdle();
  EXPECT_EQ(budget_.running_bytes(), 90u);
}

TEST_F(InlineAssemblerTest, GoingAwayGivesBackTheRoomOfWhatItStillHolds) {
  // Another user of the budget (the core converting) holds 50 bytes.
  const IngestAdmission::Id converting = budget_.Submit(50, [](IngestAdmission::Id) {});
  ASSERT_TRUE(assembler_->Begin(1, Announce("a", 40)));
  EXPECT_FALSE(assembler_->Begin(2, Announce("b", 80)));
  assembler_.reset();
  EXPECT_EQ(budget_.running_bytes(), 50u);
  EXPECT_EQ(budget_.waiting_count(), 0u);
  budget_.Release(converting);
  EXPECT_EQ(budget_.running_bytes(), 0u);
  EXPECT_THAT(admitted_, ElementsAre(1)) << "a start ran after the assembler was gone";
}

}  // namespace
}  // namespace gpuctl::daemon
