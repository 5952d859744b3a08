// CPU samples in the protobuf merge: perf samples whose interned callstacks
// resolve, root first, to the frames a cpu_sample's args.stack names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/merge/callstack_interner.h"
#include "daemon/merge/merge.h"
#include "protos/perfetto/trace/perfetto_trace.pb.h"

namespace gpuctl::merge {
namespace {

namespace fs = std::filesystem;
namespace pp = ::perfetto::protos;
using ::testing::ElementsAre;

constexpr int64_t kSampleBase = 1'700'000'000'000'000'000;

// One rank's CPU samples on threads 101 and 102 (stacks innermost first):
// the first stack on both threads, two others sharing frames with it, and
// a sample without a stack.
std::string SampledRank() {
  return absl::StrCat(
      R"({"schemaVersion":1,"gpuctl":{"trace_id":"t1","host":"n1","pid":100,"rank":0},)"
      R"("traceEvents":[
{"ph":"i","s":"t","cat":"cpu_sample","name":"hot","pid":100,"tid":101,"ts":10.000,"args":{"stack":["hot","/usr/lib/libfoo.so+0x1f3","main"]}},
{"ph":"i","s":"t","cat":"cpu_sample","name":"hot","pid":100,"tid":102,"ts":11.500,"args":{"stack":["hot","/usr/lib/libfoo.so+0x1f3","main"]}},
{"ph":"i","s":"t","cat":"cpu_sample","name":"cold","pid":100,"tid":101,"ts":12.250,"args":{"stack":["cold","main"]}},
{"ph":"i","s":"t","cat":"cpu_sample","name":"hot","pid":100,"tid":102,"ts":13.000,"args":{"stack":["hot","worker"]}},
{"ph":"i","s":"t","cat":"cpu_sample","name":"lost","pid":100,"tid":102,"ts":14.000},
{"ph":"M","name":"thread_name","pid":100,"tid":101,"ts":0,"args":{"name":"main thread"}},
{"ph":"M","name":"thread_name","pid":100,"tid":102,"ts":0,"args":{"name":"worker thread"}}
],"baseTimeNanoseconds":)",
      kSampleBase, "}");
}

// A sequence's interned profiling state, each iid defined once.
struct ProfileState {
  std::map<uint64_t, std::string> function_names, mapping_paths;
  std::map<uint64_t, std::vector<uint64_t>> mappings, callstacks;
  std::map<uint64_t, pp::Frame> frames;

  void Add(const pp::InternedData& d) {
    for (const auto& s : d.function_names())
      EXPECT_TRUE(function_names.emplace(s.iid(), s.str()).second);
    for (const auto& s : d.mapping_paths())
      EXPECT_TRUE(mapping_paths.emplace(s.iid(), s.str()).second);
    for (const auto& m : d.mappings()) {
      EXPECT_TRUE(mappings
                      .emplace(m.iid(), std::vector<uint64_t>(m.path_string_ids().begin(),
                                                              m.path_string_ids().end()))
                      .second);
    }
    for (const auto& f : d.frames()) EXPECT_TRUE(frames.emplace(f.iid(), f).second);
    for (const auto& c : d.callstacks()) {
      EXPECT_TRUE(
          callstacks
              .emplace(c.iid(), std::vector<uint64_t>(c.frame_ids().begin(), c.frame_ids().end()))
              .second);
    }
  }
  // The function names of a callstack, as stored (root first).
  std::vector<std::string> Names(uint64_t callstack_iid) const {
    std::vector<std::string> names;
    for (uint64_t frame : callstacks.at(callstack_iid)) {
      names.push_back(function_names.at(frames.at(frame).function_name_id()));
    }
    return names;
  }
};

class ProtoSamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("proto_samples_test_", ::testing::UnitTest::GetInstance()->random_seed(),
                        "_", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(ProtoSamplesTest, EachCpuSampleIsAPerfSampleWithItsCallstackRootFirst) {
  const fs::path in = dir_ / "n1-rank0-pid100.json";
  std::ofstream(in) << SampledRank();
  const std::string out = (dir_ / "merged.pftrace").string();
  absl::StatusOr<MergeResult> result = MergeTraces({in.string()}, out, MergeOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->ranks.size(), 1u);
  EXPECT_EQ(result->ranks[0].written, 5u);  // every sample is still an instant too

  std::ifstream file(out, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  pp::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(bytes.str()));
  ProfileState state;
  std::map<std::string, int64_t> tid_of;  // thread name -> merged tid
  int32_t pid = -1;
  std::vector<const pp::TracePacket*> samples;
  int instants = 0;
  for (const pp::TracePacket& p : trace.packet()) {
    EXPECT_EQ(p.trusted_packet_sequence_id(), 1u);
    state.Add(p.interned_data());  // before the packet's own data, as trace processor reads it
    if (p.has_track_descriptor() && p.track_descriptor().has_process()) {
      pid = p.track_descriptor().process().pid();
    } else if (p.has_track_descriptor() && p.track_descriptor().has_thread()) {
      tid_of[p.track_descriptor().thread().thread_name()] = p.track_descriptor().thread().tid();
    } else if (p.has_track_event()) {
      ++instants;
    } else if (p.has_perf_sample()) {
      EXPECT_EQ(p.sequence_flags(), pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
      ASSERT_TRUE(state.callstacks.count(p.perf_sample().callstack_iid()))
          << "a callstack used before it is interned";
      samples.push_back(&p);
    }
  }
  EXPECT_EQ(trace.packet(0).sequence_flags(), pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
  EXPECT_EQ(instants, 5);
  ASSERT_EQ(samples.size(), 4u);  // the one without a stack is an instant only
  ASSERT_GT(pid, 0);

  const int64_t ts_ns[] = {10'000, 11'500, 12'250, 13'000};
  const char* threads[] = {"main thread", "worker thread", "main thread", "worker thread"};
  const std::vector<std::vector<std::string>> stacks = {{"main", "/usr/lib/libfoo.so+0x1f3", "hot"},
                                                        {"main", "/usr/lib/libfoo.so+0x1f3", "hot"},
                                                        {"main", "cold"},
                                                        {"worker", "hot"}};
  for (size_t i = 0; i < samples.size(); ++i) {
    const pp::PerfSample& s = samples[i]->perf_sample();
    EXPECT_EQ(samples[i]->timestamp(), static_cast<uint64_t>(kSampleBase + ts_ns[i])) << i;
    EXPECT_EQ(s.pid(), static_cast<uint32_t>(pid)) << i;
    EXPECT_EQ(s.tid(), static_cast<uint64_t>(tid_of.at(threads[i]))) << i;
    EXPECT_FALSE(s.has_cpu()) << i;
    EXPECT_EQ(state.Names(s.callstack_iid()), stacks[i]) << i;
  }
  EXPECT_NE(tid_of.at("main thread"), tid_of.at("worker thread"));
  // One callstack per distinct stack, one frame per distinct frame.
  EXPECT_EQ(samples[0]->perf_sample().callstack_iid(), samples[1]->perf_sample().callstack_iid());
  EXPECT_EQ(state.callstacks.size(), 3u);
  EXPECT_EQ(state.frames.size(), 5u);  // main, libfoo+0x1f3, hot, cold, worker

  // The unsymbolized frame lies in its module's mapping at its offset;
  // the others in the one mapping without a path.
  const std::vector<uint64_t>& first =
      state.callstacks.at(samples[0]->perf_sample().callstack_iid());
  const pp::Frame& in_module = state.frames.at(first[1]);
  EXPECT_EQ(in_module.rel_pc(), 0x1f3u);
  std::vector<std::string> path;
  for (uint64_t id : state.mappings.at(in_module.mapping_id())) {
    path.push_back(state.mapping_paths.at(id));
  }
  EXPECT_THAT(path, ElementsAre("usr", "lib", "libfoo.so"));
  const pp::Frame& root = state.frames.at(first[0]);
  EXPECT_NE(root.mapping_id(), in_module.mapping_id());
  EXPECT_TRUE(state.mappings.at(root.mapping_id()).empty());
  EXPECT_EQ(state.mappings.size(), 2u);
}

TEST(CallstackInternerTest, ParsesModuleAndOffsetOnlyFromTheHexForm) {
  ParsedFrame f = ParseFrame("/bin/app+0x1F3a");
  EXPECT_EQ(f.module, "/bin/app");
  EXPECT_EQ(f.offset, 0x1f3au);
  EXPECT_EQ(ParseFrame("operator+").module, "");
  EXPECT_EQ(ParseFrame("0x7f0012").module, "");
  EXPECT_EQ(ParseFrame("+0x12").module, "");
  EXPECT_EQ(ParseFrame("lib.so+0x").module, "");
  EXPECT_EQ(ParseFrame("lib.so+0x12g").module, "");
}

TEST(CallstackInternerTest, RefusesStacksThatAreNotStrings) {
  CallstackInterner interner;
  pp::InternedData added;
  EXPECT_EQ(interner.Intern(Json::array(), &added), 0u);
  EXPECT_EQ(interner.Intern(Json("main"), &added), 0u);
  EXPECT_EQ(interner.Intern(Json::array({"a", 3}), &added), 0u);
  EXPECT_EQ(interner.Intern(Json::array({"a", "b"}), &added), 1u);
  EXPECT_EQ(interner.Intern(Json::array({"a", "b"}), &added), 1u);
  ASSERT_EQ(added.callstacks_size(), 1);
}

}  // namespace
}  // namespace gpuctl::merge
