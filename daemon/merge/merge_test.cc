#include "daemon/merge/merge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/merge/event_stream.h"
#include "protos/perfetto/trace/perfetto_trace.pb.h"

namespace gpuctl::merge {
namespace {

namespace fs = std::filesystem;
namespace pp = ::perfetto::protos;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kBase1 = 1'700'000'000'000'000'000;  // node1's baseTimeNanoseconds
constexpr int64_t kBase2 = 1'700'000'001'000'000'000;
constexpr int64_t kOffset1 = 2'000'000;   // node1 is 2 ms ahead of the caller
constexpr int64_t kOffset2 = -3'000'500;  // node2 3.0005 ms behind

class MergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("merge_test_", ::testing::UnitTest::GetInstance()->random_seed(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "_gpuctl");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::string Manifest(const std::string& host, const std::string& file, int64_t offset) {
    return absl::StrCat(R"({"traceId":"t1","host":")", host, R"(","results":[{"file":")", file,
                        R"(","host":")", host, R"("}],"clock":{"offset":")",
                        static_cast<double>(offset) / 1e9, R"(s"}})");
  }
  // A gpuctl file of one rank: a host slice, a kernel on GPU 0 stream 7, an
  // instant, a two-series counter, a flow from the host call to the kernel,
  // and the names gpuctld writes. Both ranks use pid 100.
  static std::string Rank(const std::string& host, int rank, int64_t base) {
    return absl::StrCat(R"({"schemaVersion":1,"distributedInfo":{"backend":"","rank":)", rank,
                        R"(},"gpuctl":{"trace_id":"t1","host":")", host, R"(","pid":100,"rank":)",
                        rank,
                        R"(},"traceEvents":[
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":101,"ts":10.250,"dur":4.001,"args":{"correlation":9,"nested":{"a":[1,2.5,"x"]}}},
{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":20.000,"dur":100.000,"args":{"stream":7}},
{"ph":"i","s":"t","cat":"user_annotation","name":"mark","pid":100,"tid":101,"ts":30.5},
{"ph":"C","name":"mem","pid":100,"tid":101,"ts":40,"args":{"used":5,"free":2.5}},
{"ph":"s","id":9,"cat":"ac2g","name":"ac2g","pid":100,"tid":101,"ts":10.250},
{"ph":"f","id":9,"cat":"ac2g","name":"ac2g","bp":"e","pid":0,"tid":7,"ts":20.000},
{"ph":"X","cat":"kernel","name":"no time","pid":0,"tid":7,"dur":1},
{"ph":"M","name":"process_name","pid":100,"tid":0,"ts":0,"args":{"name":"python"}},
{"ph":"M","name":"thread_name","pid":100,"tid":101,"ts":0,"args":{"name":"main"}},
{"ph":"M","name":"process_name","pid":0,"tid":0,"ts":0,"args":{"name":"GPU 0"}},
{"ph":"M","name":"process_labels","pid":0,"tid":0,"ts":0,"args":{"labels":"GPU 0"}},
{"ph":"M","name":"thread_name","pid":0,"tid":7,"ts":0,"args":{"name":"stream 7"}}
],"traceName":"x","displayTimeUnit":"ms","baseTimeNanoseconds":)",
                        base, "}");
  }
  void WriteTwoHosts() {
    Write("node1-rank0-pid100.json", Rank("node1", 0, kBase1));
    Write("node2-rank1-pid100.json.gz",
          analysis::testing::GzipMembers(Rank("node2", 1, kBase2), 2));
    Write("_gpuctl/node1.json", Manifest("node1", "node1-rank0-pid100.json", kOffset1));
    Write("_gpuctl/node2.json", Manifest("node2", "node2-rank1-pid100.json.gz", kOffset2));
  }
  std::vector<std::string> Files() const {
    return {(dir_ / "node2-rank1-pid100.json.gz").string(),
            (dir_ / "node1-rank0-pid100.json").string()};
  }

  fs::path dir_;
};

TEST_F(MergeTest, JsonGivesEachRankItsOwnProcessOnTheCallersClock) {
  WriteTwoHosts();
  const std::string out = (dir_ / "merged.json").string();
  absl::StatusOr<MergeResult> result = MergeTraces(Files(), out, MergeOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->format, MergeFormat::kJson);
  ASSERT_EQ(result->ranks.size(), 2u);
  EXPECT_EQ(result->ranks[0].process_name, "node1 rank 0 pid 100");  // ordered by rank
  EXPECT_EQ(result->ranks[1].process_name, "node2 rank 1 pid 100");
  EXPECT_EQ(result->ranks[0].skipped, 1u);  // the X without ts
  EXPECT_EQ(result->ranks[0].written, 6u);
  EXPECT_EQ(result->ranks[0].metadata, 5u);

  const Json merged = Json::parse(Read(out));
  const int64_t base = merged["baseTimeNanoseconds"].get<int64_t>();
  // The earliest aligned event: node1's base + 10.25 µs - 2 ms, its second.
  EXPECT_EQ(base, (kBase1 + 10'250 - kOffset1) / 1'000'000'000 * 1'000'000'000);
  std::map<int64_t, std::string> process_names;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  std::map<std::string, std::vector<Json>> by_process;  // non-metadata events
  for (const Json& e : merged["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      process_names[e["pid"]] = e["args"]["name"];
    } else if (e["ph"] == "M" && e["name"] == "thread_name") {
      thread_names[{e["pid"], e["tid"]}] = e["args"]["name"];
    }
  }
  for (const Json& e : merged["traceEvents"]) {
    if (e["ph"] != "M") by_process[process_names.at(e["pid"])].push_back(e);
  }
  ASSERT_EQ(process_names.size(), 2u);
  ASSERT_EQ(by_process.size(), 2u);
  const int64_t offsets[] = {kOffset1, kOffset2}, bases[] = {kBase1, kBase2};
  const char* names[] = {"node1 rank 0 pid 100", "node2 rank 1 pid 100"};
  std::vector<int64_t> flow_ids;
  for (int r = 0; r < 2; ++r) {
    const std::vector<Json>& events = by_process[names[r]];
    ASSERT_EQ(events.size(), 6u) << names[r];
    // ts on the merged axis: own base + ts - own offset - merged base, in µs.
    const Json& launch = events[0];
    EXPECT_EQ(launch["name"], "cudaLaunchKernel");
    EXPECT_NEAR(launch["ts"].get<double>(),
                static_cast<double>(bases[r] + 10'250 - offsets[r] - base) / 1000, 1e-3);
    EXPECT_DOUBLE_EQ(launch["dur"].get<double>(), 4.001);
    EXPECT_EQ(launch["args"]["nested"]["a"][2], "x");
    EXPECT_EQ(thread_names.at({launch["pid"], launch["tid"]}), "main");
    const Json& kernel = events[1];
    EXPECT_EQ(thread_names.at({kernel["pid"], kernel["tid"]}), "GPU 0 / stream 7");
    EXPECT_NE(kernel["tid"], launch["tid"]);
    EXPECT_EQ(events[3]["args"]["free"], 2.5);
    EXPECT_EQ(events[4]["id"], events[5]["id"]);  // s and f still meet
    flow_ids.push_back(events[4]["id"]);
  }
  EXPECT_NE(flow_ids[0], flow_ids[1]);  // the same id 9 in both files, two flows merged
  EXPECT_EQ(merged["gpuctlMerge"]["ranks"][1]["clock_offset_ns"], kOffset2);
  EXPECT_THAT(merged["gpuctlMerge"]["alignment"].get<std::string>(), HasSubstr("one-way"));
}

// The iids of one sequence's interned names.
struct Interned {
  std::map<uint64_t, std::string> names, categories;
};

TEST_F(MergeTest, ProtoDecodesWithEveryRankOnItsOwnTracks) {
  WriteTwoHosts();
  const std::string out = (dir_ / "merged.pftrace").string();
  absl::StatusOr<MergeResult> result = MergeTraces(Files(), out, MergeOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->format, MergeFormat::kProto);
  pp::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(Read(out)));
  std::map<uint64_t, std::string> process_of_track;  // track uuid -> process name
  std::map<uint64_t, std::string> process_by_uuid;
  std::map<uint64_t, std::string> track_names;
  Interned interned;
  std::map<std::string, std::vector<const pp::TracePacket*>> events_of;  // by process name
  std::set<int32_t> pids;
  for (const pp::TracePacket& p : trace.packet()) {
    EXPECT_EQ(p.trusted_packet_sequence_id(), 1u);
    for (const auto& n : p.interned_data().event_names()) interned.names[n.iid()] = n.name();
    for (const auto& c : p.interned_data().event_categories()) {
      interned.categories[c.iid()] = c.name();
    }
    if (p.has_track_descriptor()) {
      const pp::TrackDescriptor& t = p.track_descriptor();
      if (t.has_process()) {
        process_by_uuid[t.uuid()] = t.process().process_name();
        pids.insert(t.process().pid());
        EXPECT_THAT(t.description(), HasSubstr("clock offset"));
      } else {
        process_of_track[t.uuid()] = process_by_uuid.at(t.parent_uuid());
        track_names[t.uuid()] = t.has_thread() ? t.thread().thread_name() : t.name();
      }
    }
    if (p.has_track_event()) {
      events_of[process_of_track.at(p.track_event().track_uuid())].push_back(&p);
    }
  }
  EXPECT_EQ(trace.packet(0).sequence_flags(), pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
  EXPECT_EQ(pids.size(), 2u);
  const int64_t offsets[] = {kOffset1, kOffset2}, bases[] = {kBase1, kBase2};
  const char* names[] = {"node1 rank 0 pid 100", "node2 rank 1 pid 100"};
  for (int r = 0; r < 2; ++r) {
    const auto& events = events_of[names[r]];
    // 2 X (begin + end each), 1 instant, 2 counter values, 2 flow instants.
    ASSERT_EQ(events.size(), 9u) << names[r];
    const pp::TrackEvent& begin = events[0]->track_event();
    EXPECT_EQ(begin.type(), pp::TrackEvent::TYPE_SLICE_BEGIN);
    EXPECT_EQ(interned.names.at(begin.name_iid()), "cudaLaunchKernel");
    EXPECT_EQ(interned.categories.at(begin.category_iids(0)), "cuda_runtime");
    EXPECT_EQ(events[0]->timestamp(), static_cast<uint64_t>(bases[r] + 10'250 - offsets[r]));
    EXPECT_EQ(events[1]->timestamp(), events[0]->timestamp() + 4'001);
    EXPECT_EQ(events[1]->track_event().type(), pp::TrackEvent::TYPE_SLICE_END);
    EXPECT_EQ(begin.debug_annotations(1).dict_entries(0).array_values(2).string_value(), "x");
    EXPECT_EQ(track_names.at(events[2]->track_event().track_uuid()), "GPU 0 / stream 7");
    EXPECT_EQ(events[5]->track_event().type(), pp::TrackEvent::TYPE_COUNTER);
    EXPECT_EQ(track_names.at(events[5]->track_event().track_uuid()), "mem used");
    EXPECT_EQ(events[5]->track_event().counter_value(), 5);
    EXPECT_EQ(events[6]->track_event().double_counter_value(), 2.5);
    ASSERT_EQ(events[7]->track_event().flow_ids_size(), 1);
    ASSERT_EQ(events[8]->track_event().terminating_flow_ids_size(), 1);
    EXPECT_EQ(events[7]->track_event().flow_ids(0),
              events[8]->track_event().terminating_flow_ids(0));
  }
}

TEST_F(MergeTest, ProtoPutsAsyncEventsOnATrackPerIdUnderTheirRank) {
  // Two async ids of one name on one thread, one with a nested slice and an
  // instant; an async event without an id has nowhere to go.
  Write("node1-rank0-pid100.json", R"({"traceEvents":[
{"ph":"b","cat":"data","name":"load","id":1,"pid":100,"tid":101,"ts":10},
{"ph":"b","cat":"data","name":"load","id":2,"pid":100,"tid":101,"ts":12},
{"ph":"b","cat":"data","name":"decode","id":1,"pid":100,"tid":101,"ts":13},
{"ph":"n","cat":"data","name":"chunk","id":1,"pid":100,"tid":101,"ts":14,"args":{"bytes":7}},
{"ph":"e","cat":"data","name":"decode","id":1,"pid":100,"tid":101,"ts":15},
{"ph":"e","cat":"data","name":"load","id":1,"pid":100,"tid":101,"ts":20},
{"ph":"e","cat":"data","name":"load","id":2,"pid":100,"tid":101,"ts":30},
{"ph":"b","cat":"data","name":"orphan","pid":100,"tid":101,"ts":31},
{"ph":"X","cat":"cpu_op","name":"step","pid":100,"tid":101,"ts":5,"dur":40}
],"baseTimeNanoseconds":1000000000})");
  const std::string out = (dir_ / "merged.pftrace").string();
  absl::StatusOr<MergeResult> result =
      MergeTraces({(dir_ / "node1-rank0-pid100.json").string()}, out, MergeOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->ranks.size(), 1u);
  EXPECT_EQ(result->ranks[0].written, 8u);
  EXPECT_EQ(result->ranks[0].unsupported, 1u);  // the async event without an id
  pp::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(Read(out)));
  uint64_t process = 0;
  std::map<uint64_t, std::string> async_tracks;  // uuid -> name
  std::map<uint64_t, std::vector<std::pair<pp::TrackEvent::Type, uint64_t>>> on_track;
  for (const pp::TracePacket& p : trace.packet()) {
    if (p.has_track_descriptor()) {
      const pp::TrackDescriptor& t = p.track_descriptor();
      if (t.has_process()) process = t.uuid();
      if (!t.has_process() && !t.has_thread()) {
        EXPECT_EQ(t.parent_uuid(), process);
        async_tracks[t.uuid()] = t.name();
      }
    }
    if (p.has_track_event()) {
      const uint64_t uuid = p.track_event().track_uuid();
      // Every event's track was described before it.
      if (async_tracks.count(uuid) != 0) {
        on_track[uuid].emplace_back(p.track_event().type(), p.timestamp());
      }
    }
  }
  ASSERT_EQ(async_tracks.size(), 2u);
  const uint64_t first = async_tracks.begin()->first,
                 second = std::next(async_tracks.begin())->first;
  EXPECT_EQ(async_tracks[first], "load");
  EXPECT_EQ(async_tracks[second], "load");
  using T = pp::TrackEvent;
  const uint64_t base = 1'000'000'000;
  EXPECT_THAT(on_track[first], ElementsAre(std::pair(T::TYPE_SLICE_BEGIN, base + 10'000),
                                           std::pair(T::TYPE_SLICE_BEGIN, base + 13'000),
                                           std::pair(T::TYPE_INSTANT, base + 14'000),
                                           std::pair(T::TYPE_SLICE_END, base + 15'000),
                                           std::pair(T::TYPE_SLICE_END, base + 20'000)));
  EXPECT_THAT(on_track[second], ElementsAre(std::pair(T::TYPE_SLICE_BEGIN, base + 12'000),
                                            std::pair(T::TYPE_SLICE_END, base + 30'000)));
}

// node1's manifest carries the caller's measured midpoint and round trip:
// its times move by the midpoint, not the receipt offset, and each output
// states the bound; node2's, from an older caller, aligns as before.
TEST_F(MergeTest, AMeasuredRoundTripAlignsByTheMidpointAndStatesTheBound) {
  constexpr int64_t kMidpoint1 = 1'850'000;  // 150 us of transit in kOffset1
  constexpr int64_t kRoundTrip1 = 302'000;
  Write("node1-rank0-pid100.json", Rank("node1", 0, kBase1));
  Write("node2-rank1-pid100.json.gz", analysis::testing::GzipMembers(Rank("node2", 1, kBase2), 1));
  Write(
      "_gpuctl/node1.json",
      absl::StrCat(R"({"traceId":"t1","host":"node1","results":[{"file":"node1-rank0-pid100.json",)"
                   R"("host":"node1"}],"clock":{"offset":"0.002s","midpointOffset":"0.00185s",)"
                   R"("roundTrip":"0.000302s"}})"));
  Write("_gpuctl/node2.json", Manifest("node2", "node2-rank1-pid100.json.gz", kOffset2));

  const std::string json_out = (dir_ / "merged.json").string();
  absl::StatusOr<MergeResult> result = MergeTraces(Files(), json_out, MergeOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->ranks.size(), 2u);
  ASSERT_TRUE(result->ranks[0].clock.has_value());
  EXPECT_EQ(result->ranks[0].clock->offset_ns, kMidpoint1);
  EXPECT_EQ(result->ranks[0].clock->receipt_offset_ns, kOffset1);
  EXPECT_EQ(result->ranks[0].clock->round_trip_ns, kRoundTrip1);
  EXPECT_EQ(result->ranks[0].clock->bound_ns(), 151'000);
  ASSERT_TRUE(result->ranks[1].clock.has_value());
  EXPECT_FALSE(result->ranks[1].clock->measured());
  EXPECT_EQ(result->ranks[1].clock->offset_ns, kOffset2);

  const Json merged = Json::parse(Read(json_out));
  const int64_t base = merged["baseTimeNanoseconds"].get<int64_t>();
  std::map<int64_t, std::string> process_names;
  for (const Json& e : merged["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
  }
  std::map<std::string, double> launch_ts;
  for (const Json& e : merged["traceEvents"]) {
    if (e["name"] == "cudaLaunchKernel") launch_ts[process_names.at(e["pid"])] = e["ts"];
  }
  EXPECT_NEAR(launch_ts.at("node1 rank 0 pid 100"),
              static_cast<double>(kBase1 + 10'250 - kMidpoint1 - base) / 1000, 1e-3);
  EXPECT_NEAR(launch_ts.at("node2 rank 1 pid 100"),
              static_cast<double>(kBase2 + 10'250 - kOffset2 - base) / 1000, 1e-3);
  const Json& ranks = merged["gpuctlMerge"]["ranks"];
  EXPECT_EQ(ranks[0]["clock_offset_ns"], kMidpoint1);
  EXPECT_EQ(ranks[0]["clock_receipt_offset_ns"], kOffset1);
  EXPECT_EQ(ranks[0]["clock_round_trip_ns"], kRoundTrip1);
  EXPECT_EQ(ranks[0]["clock_bound_ns"], 151'000);
  EXPECT_EQ(ranks[1]["clock_offset_ns"], kOffset2);
  EXPECT_TRUE(ranks[1]["clock_round_trip_ns"].is_null());
  EXPECT_TRUE(ranks[1]["clock_bound_ns"].is_null());
  EXPECT_THAT(merged["gpuctlMerge"]["alignment"].get<std::string>(), HasSubstr("midpoint"));

  const std::string proto_out = (dir_ / "merged.pftrace").string();
  ASSERT_TRUE(MergeTraces(Files(), proto_out, MergeOptions{}).ok());
  pp::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(Read(proto_out)));
  std::map<std::string, std::string> descriptions;
  for (const pp::TracePacket& p : trace.packet()) {
    if (p.has_track_descriptor() && p.track_descriptor().has_process()) {
      descriptions[p.track_descriptor().process().process_name()] =
          p.track_descriptor().description();
    }
  }
  EXPECT_THAT(descriptions["node1 rank 0 pid 100"],
              HasSubstr("clock offset 1.850 ms +/-0.151 ms ("));
  EXPECT_THAT(descriptions["node1 rank 0 pid 100"],
              HasSubstr("times moved onto the caller's clock, within +/-0.151 ms (half the "
                        "measured round trip of 0.302 ms) plus the clocks' drift since the "
                        "trace request"));
  EXPECT_THAT(descriptions["node2 rank 1 pid 100"],
              HasSubstr("early by at most the trace request's one-way transit to this host"));
}

// A round trip without its midpoint, or one past what gpuctld accepts,
// measured nothing: the receipt offset is used.
TEST_F(MergeTest, AnImplausibleRoundTripFallsBackToTheReceiptOffset) {
  Write("node1-rank0-pid100.json", Rank("node1", 0, kBase1));
  for (const char* clock :
       {R"("roundTrip":"0.000301s")", R"("midpointOffset":"0.00185s","roundTrip":"61s")",
        R"("midpointOffset":"0.00185s","roundTrip":"-0.000301s")"}) {
    Write("_gpuctl/node1.json",
          absl::StrCat(R"({"traceId":"t1","host":"node1","results":[{"file":)"
                       R"("node1-rank0-pid100.json","host":"node1"}],"clock":{"offset":"0.002s",)",
                       clock, "}}"));
    absl::StatusOr<MergeResult> result = MergeTraces({(dir_ / "node1-rank0-pid100.json").string()},
                                                     (dir_ / "m.json").string(), MergeOptions{});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->ranks[0].clock.has_value()) << clock;
    EXPECT_FALSE(result->ranks[0].clock->measured()) << clock;
    EXPECT_EQ(result->ranks[0].clock->offset_ns, kOffset1) << clock;
  }
}

TEST_F(MergeTest, WithoutManifestRanksKeepTheirOwnClock) {
  Write("a.json", Rank("node1", 0, kBase1));
  absl::StatusOr<MergeResult> result =
      MergeTraces({(dir_ / "a.json").string()}, (dir_ / "m.json.gz").string(), MergeOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->gzip);
  EXPECT_FALSE(result->ranks[0].clock.has_value());
  EXPECT_EQ(result->base_time_ns, kBase1);
}

TEST_F(MergeTest, ChoosesTheFormatByFlagNameAndSize) {
  MergeOptions small;
  small.json_max_events = 10;
  small.json_max_bytes = 1000;
  EXPECT_EQ(ChooseOutput("m.json", small, 10, 1000).format, MergeFormat::kJson);
  MergeResult big = ChooseOutput("m.json.gz", small, 11, 10);
  EXPECT_EQ(big.format, MergeFormat::kProto);
  EXPECT_EQ(big.path, "m.pftrace");
  EXPECT_FALSE(big.gzip);
  EXPECT_EQ(ChooseOutput("m.json", small, 1, 1001).path, "m.pftrace");
  EXPECT_EQ(ChooseOutput("m.pftrace", small, 1, 1).format, MergeFormat::kProto);
  small.format = MergeFormat::kJson;
  MergeResult forced = ChooseOutput("m.json.gz", small, 11, 10);
  EXPECT_EQ(forced.format, MergeFormat::kJson);
  EXPECT_TRUE(forced.gzip);
  small.format = MergeFormat::kProto;
  EXPECT_EQ(ChooseOutput("m.bin", small, 1, 1).path, "m.bin");
}

TEST_F(MergeTest, AMalformedRankFailsTheMergeAndWritesNothing) {
  WriteTwoHosts();
  const std::string good = Rank("node3", 2, kBase1);
  Write("node3-rank2-pid7.json", good.substr(0, good.size() / 2));  // cut off
  const fs::path out = dir_ / "merged.json";
  std::ofstream(out) << "earlier";
  std::vector<std::string> files = Files();
  files.push_back((dir_ / "node3-rank2-pid7.json").string());
  absl::StatusOr<MergeResult> result = MergeTraces(files, out.string(), MergeOptions{});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("node3-rank2-pid7.json: malformed JSON"));
  EXPECT_EQ(Read(out), "earlier");
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr(".gpuctl-merge")));
  }
}

}  // namespace
}  // namespace gpuctl::merge
