// Ids in the merge: `id2` (local to a process or global) and the legacy
// `scope` beside `id` on async and flow events, and object events (N, O,
// D), in both output formats.
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
#include "daemon/merge/event_stream.h"
#include "daemon/merge/merge.h"
#include "protos/perfetto/trace/perfetto_trace.pb.h"

namespace gpuctl::merge {
namespace {

namespace fs = std::filesystem;
namespace pp = ::perfetto::protos;
using ::testing::ElementsAre;
using ::testing::SizeIs;

constexpr uint64_t kIdsBase = 1'000'000'000;  // the files' baseTimeNanoseconds

// Async slices and flows of one rank on two processes (pid 100 and 200):
// id2 local ids of one value in both, an id2 global id across them, an `id`
// and id2s of the same text, one `id` in two scopes, and an id2 with neither
// member.
constexpr char kId2Events[] = R"(
{"ph":"b","cat":"io","name":"local on 100","id2":{"local":1},"pid":100,"tid":101,"ts":10},
{"ph":"b","cat":"io","name":"local on 200","id2":{"local":1},"pid":200,"tid":201,"ts":11},
{"ph":"e","cat":"io","name":"local on 100","id2":{"local":1},"pid":100,"tid":101,"ts":12},
{"ph":"e","cat":"io","name":"local on 200","id2":{"local":1},"pid":200,"tid":201,"ts":13},
{"ph":"b","cat":"io","name":"global","id2":{"global":1},"pid":100,"tid":101,"ts":14},
{"ph":"e","cat":"io","name":"global","id2":{"global":1},"pid":200,"tid":201,"ts":15},
{"ph":"b","cat":"io","name":"plain","id":1,"pid":100,"tid":101,"ts":16},
{"ph":"e","cat":"io","name":"plain","id":1,"pid":100,"tid":101,"ts":17},
{"ph":"b","cat":"io","name":"scope a","id":2,"scope":"a","pid":100,"tid":101,"ts":18},
{"ph":"b","cat":"io","name":"scope b","id":2,"scope":"b","pid":100,"tid":101,"ts":19},
{"ph":"e","cat":"io","name":"scope a","id":2,"scope":"a","pid":100,"tid":101,"ts":20},
{"ph":"e","cat":"io","name":"scope b","id":2,"scope":"b","pid":100,"tid":101,"ts":21},
{"ph":"n","cat":"io","name":"no id","id2":{"other":1},"pid":100,"tid":101,"ts":22},
{"ph":"s","cat":"io","name":"hop","id2":{"global":3},"pid":100,"tid":101,"ts":23},
{"ph":"f","cat":"io","name":"hop","id2":{"global":3},"bp":"e","pid":200,"tid":201,"ts":24},
{"ph":"s","cat":"io","name":"local hop","id2":{"local":3},"pid":100,"tid":101,"ts":25},
{"ph":"f","cat":"io","name":"local hop","id2":{"local":3},"bp":"e","pid":100,"tid":101,"ts":26}
)";

// Objects of one rank: a Layer created, snapshot and destroyed, a Frame of
// the same id alive meanwhile, a Layer of that id in another process, a
// Buffer with an id2 global id destroyed by another process, and a
// snapshot without an id.
constexpr char kObjectEvents[] = R"(
{"ph":"N","cat":"cc","name":"Layer","id":"0x1","pid":100,"tid":101,"ts":10},
{"ph":"N","cat":"cc","name":"Frame","id":"0x1","pid":100,"tid":101,"ts":11},
{"ph":"O","cat":"cc","name":"Layer","id":"0x1","pid":100,"tid":101,"ts":12,"args":{"snapshot":{"bounds":{"w":2,"h":3},"children":[4,5]}}},
{"ph":"D","cat":"cc","name":"Frame","id":"0x1","pid":100,"tid":101,"ts":13},
{"ph":"D","cat":"cc","name":"Layer","id":"0x1","pid":100,"tid":101,"ts":14},
{"ph":"N","cat":"cc","name":"Layer","id":"0x1","pid":200,"tid":201,"ts":15},
{"ph":"D","cat":"cc","name":"Layer","id":"0x1","pid":200,"tid":201,"ts":16},
{"ph":"N","cat":"cc","name":"Buffer","id2":{"global":7},"pid":100,"tid":101,"ts":17},
{"ph":"D","cat":"cc","name":"Buffer","id2":{"global":7},"pid":200,"tid":201,"ts":18},
{"ph":"O","cat":"cc","name":"Orphan","pid":100,"tid":101,"ts":19,"args":{"snapshot":{}}}
)";

// An event on a track of its own (async or object), as decoded.
struct IdTrackEvent {
  pp::TrackEvent::Type type;
  uint64_t ts;
  std::string name;
  const pp::TrackEvent* event;
};

class MergeIdsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("merge_ids_test_", ::testing::UnitTest::GetInstance()->random_seed(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Merges one rank of `events` into `out`.
  MergedRank Merge(const std::string& events, const std::string& out) {
    const fs::path in = dir_ / "node1-rank0-pid100.json";
    std::ofstream(in, std::ios::binary) << absl::StrCat(
        R"({"traceEvents":[)", events, R"(],"baseTimeNanoseconds":)", kIdsBase, "}");
    absl::StatusOr<MergeResult> result = MergeTraces({in.string()}, out, MergeOptions{});
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok() || result->ranks.size() != 1) return MergedRank{};
    return result->ranks[0];
  }
  std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The merged JSON's events that are not metadata, in order.
  std::vector<Json> JsonEvents(const std::string& events) {
    const std::string out = (dir_ / "merged.json").string();
    Merge(events, out);
    const Json merged = Json::parse(Read(out));
    std::vector<Json> kept;
    for (const Json& e : merged["traceEvents"]) {
      if (e["ph"] != "M") kept.push_back(e);
    }
    return kept;
  }
  // Decodes the protobuf merge of `events` into trace_, tracks_ and on_.
  MergedRank DecodeProto(const std::string& events) {
    const std::string out = (dir_ / "merged.pftrace").string();
    MergedRank rank = Merge(events, out);
    EXPECT_TRUE(trace_.ParseFromString(Read(out)));
    std::map<uint64_t, std::string> names;
    uint64_t process = 0;
    for (const pp::TracePacket& p : trace_.packet()) {
      for (const auto& n : p.interned_data().event_names()) names[n.iid()] = n.name();
      for (const auto& n : p.interned_data().debug_annotation_names()) {
        annotation_names_[n.iid()] = n.name();
      }
      if (p.has_track_descriptor()) {
        const pp::TrackDescriptor& t = p.track_descriptor();
        if (t.has_process()) process = t.uuid();
        if (!t.has_process() && !t.has_thread()) {
          EXPECT_EQ(t.parent_uuid(), process) << t.name();
          EXPECT_EQ(tracks_.count(t.uuid()), 0u) << "described twice: " << t.name();
          tracks_[t.uuid()] = t.name();
        }
      }
      if (p.has_track_event() && tracks_.count(p.track_event().track_uuid()) != 0) {
        const pp::TrackEvent& e = p.track_event();
        on_[e.track_uuid()].push_back(IdTrackEvent{
            e.type(), p.timestamp(), e.has_name_iid() ? names.at(e.name_iid()) : e.name(), &e});
      }
    }
    return rank;
  }
  // The uuids of the async and object tracks named `name`, in the order
  // they were made.
  std::vector<uint64_t> TracksNamed(const std::string& name) const {
    std::vector<uint64_t> uuids;
    for (const auto& [uuid, n] : tracks_) {
      if (n == name) uuids.push_back(uuid);
    }
    return uuids;
  }
  // The one event of `track` of type `type`.
  const pp::TrackEvent& Only(uint64_t track, pp::TrackEvent::Type type) {
    const IdTrackEvent* found = nullptr;
    for (const IdTrackEvent& e : on_[track]) {
      if (e.type != type) continue;
      EXPECT_EQ(found, nullptr) << tracks_[track];
      found = &e;
    }
    if (found == nullptr) {
      ADD_FAILURE() << tracks_[track] << " has no event of type " << type;
      return pp::TrackEvent::default_instance();
    }
    return *found->event;
  }

  fs::path dir_;
  pp::Trace trace_;
  std::map<uint64_t, std::string> tracks_, annotation_names_;
  std::map<uint64_t, std::vector<IdTrackEvent>> on_;
};

using T = pp::TrackEvent;

TEST_F(MergeIdsTest, ProtoScopesId2LocalByProcessGlobalByRankAndScopesApart) {
  const MergedRank rank = DecodeProto(kId2Events);
  EXPECT_EQ(rank.written, 16u);
  EXPECT_EQ(rank.unsupported, 1u);  // the async event whose id2 has no id
  // Local 1 on two processes, global 1, id 1, and id 2 in two scopes: six
  // tracks, each with its own begin and end.
  ASSERT_EQ(tracks_.size(), 6u);
  for (const char* name :
       {"local on 100", "local on 200", "global", "plain", "scope a", "scope b"}) {
    ASSERT_THAT(TracksNamed(name), SizeIs(1)) << name;
    const std::vector<IdTrackEvent>& events = on_[TracksNamed(name)[0]];
    ASSERT_EQ(events.size(), 2u) << name;
    EXPECT_EQ(events[0].type, T::TYPE_SLICE_BEGIN) << name;
    EXPECT_EQ(events[0].name, name);
    EXPECT_EQ(events[1].type, T::TYPE_SLICE_END) << name;
  }
  EXPECT_EQ(on_[TracksNamed("global")[0]][1].ts, kIdsBase + 15'000);  // ended on pid 200

  // Flows: s and f of one id2 meet, whether global (across processes) or
  // local; the two do not.
  std::map<std::string, std::vector<uint64_t>> leaving, arriving;
  std::map<uint64_t, std::string> names;
  for (const pp::TracePacket& p : trace_.packet()) {
    for (const auto& n : p.interned_data().event_names()) names[n.iid()] = n.name();
    if (!p.has_track_event()) continue;
    const T& e = p.track_event();
    const std::string name = e.has_name_iid() ? names[e.name_iid()] : e.name();
    for (uint64_t id : e.flow_ids()) leaving[name].push_back(id);
    for (uint64_t id : e.terminating_flow_ids()) arriving[name].push_back(id);
  }
  ASSERT_THAT(leaving["hop"], SizeIs(1));
  EXPECT_EQ(leaving["hop"], arriving["hop"]);
  ASSERT_THAT(leaving["local hop"], SizeIs(1));
  EXPECT_EQ(leaving["local hop"], arriving["local hop"]);
  EXPECT_NE(leaving["hop"], leaving["local hop"]);
}

TEST_F(MergeIdsTest, ProtoGivesEachObjectATrackWithItsSnapshots) {
  const MergedRank rank = DecodeProto(kObjectEvents);
  EXPECT_EQ(rank.written, 9u);
  EXPECT_EQ(rank.unsupported, 1u);  // the snapshot without an id
  ASSERT_EQ(tracks_.size(), 4u);
  // The Layer of pid 100, then pid 200's: one id, two processes, two objects.
  const std::vector<uint64_t> layers = TracksNamed("Layer 0x1");
  ASSERT_THAT(layers, SizeIs(2));
  ASSERT_THAT(TracksNamed("Frame 0x1"), SizeIs(1));
  ASSERT_THAT(TracksNamed("Buffer 7"), SizeIs(1));

  std::vector<std::pair<T::Type, uint64_t>> layer;
  for (const IdTrackEvent& e : on_[layers[0]]) {
    layer.emplace_back(e.type, e.ts);
    if (e.type != T::TYPE_SLICE_END) {
      EXPECT_EQ(e.name, "Layer");
    }
  }
  EXPECT_THAT(layer, ElementsAre(std::pair(T::TYPE_SLICE_BEGIN, kIdsBase + 10'000),
                                 std::pair(T::TYPE_INSTANT, kIdsBase + 12'000),
                                 std::pair(T::TYPE_SLICE_END, kIdsBase + 14'000)));
  const T& snapshot = Only(layers[0], T::TYPE_INSTANT);
  ASSERT_EQ(snapshot.debug_annotations_size(), 1);
  const pp::DebugAnnotation& args = snapshot.debug_annotations(0);
  EXPECT_EQ(annotation_names_[args.name_iid()], "snapshot");
  ASSERT_EQ(args.dict_entries_size(), 2);
  const pp::DebugAnnotation& bounds = args.dict_entries(0);
  EXPECT_EQ(bounds.name(), "bounds");
  ASSERT_EQ(bounds.dict_entries_size(), 2);
  EXPECT_EQ(bounds.dict_entries(0).name(), "w");
  EXPECT_EQ(bounds.dict_entries(0).uint_value(), 2u);
  EXPECT_EQ(args.dict_entries(1).name(), "children");
  ASSERT_EQ(args.dict_entries(1).array_values_size(), 2);
  EXPECT_EQ(args.dict_entries(1).array_values(1).uint_value(), 5u);

  auto begin_end = [&](uint64_t track) {
    std::vector<std::pair<T::Type, uint64_t>> kept;
    for (const IdTrackEvent& e : on_[track]) kept.emplace_back(e.type, e.ts);
    return kept;
  };
  EXPECT_THAT(begin_end(TracksNamed("Frame 0x1")[0]),
              ElementsAre(std::pair(T::TYPE_SLICE_BEGIN, kIdsBase + 11'000),
                          std::pair(T::TYPE_SLICE_END, kIdsBase + 13'000)));
  EXPECT_THAT(begin_end(layers[1]), ElementsAre(std::pair(T::TYPE_SLICE_BEGIN, kIdsBase + 15'000),
                                                std::pair(T::TYPE_SLICE_END, kIdsBase + 16'000)));
  // A global id2: created by pid 100, destroyed by pid 200, one object.
  EXPECT_THAT(begin_end(TracksNamed("Buffer 7")[0]),
              ElementsAre(std::pair(T::TYPE_SLICE_BEGIN, kIdsBase + 17'000),
                          std::pair(T::TYPE_SLICE_END, kIdsBase + 18'000)));
}

// Legacy async slices (S start, T and p steps, F finish) of two ids.
constexpr char kLegacyAsyncEvents[] = R"(
{"ph":"S","cat":"net","name":"fetch","id":"0x5","pid":100,"tid":101,"ts":10},
{"ph":"S","cat":"net","name":"fetch","id":"0x6","pid":100,"tid":101,"ts":11},
{"ph":"T","cat":"net","name":"fetch","id":"0x5","pid":100,"tid":101,"ts":12,"args":{"step":"sent"}},
{"ph":"p","cat":"net","name":"fetch","id":"0x6","pid":100,"tid":101,"ts":13,"args":{"step":"sent"}},
{"ph":"F","cat":"net","name":"fetch","id":"0x5","pid":100,"tid":101,"ts":14},
{"ph":"F","cat":"net","name":"fetch","id":"0x6","pid":100,"tid":101,"ts":15}
)";

TEST_F(MergeIdsTest, ProtoPutsLegacyAsyncSlicesOnATrackPerId) {
  const MergedRank rank = DecodeProto(kLegacyAsyncEvents);
  EXPECT_EQ(rank.written, 6u);
  EXPECT_EQ(rank.unsupported, 0u);
  const std::vector<uint64_t> tracks = TracksNamed("fetch");
  ASSERT_THAT(tracks, SizeIs(2));
  auto kinds = [&](uint64_t track) {
    std::vector<std::pair<T::Type, uint64_t>> kept;
    for (const IdTrackEvent& e : on_[track]) kept.emplace_back(e.type, e.ts);
    return kept;
  };
  EXPECT_THAT(kinds(tracks[0]), ElementsAre(std::pair(T::TYPE_SLICE_BEGIN, kIdsBase + 10'000),
                                            std::pair(T::TYPE_INSTANT, kIdsBase + 12'000),
                                            std::pair(T::TYPE_SLICE_END, kIdsBase + 14'000)));
  EXPECT_THAT(kinds(tracks[1]), ElementsAre(std::pair(T::TYPE_SLICE_BEGIN, kIdsBase + 11'000),
                                            std::pair(T::TYPE_INSTANT, kIdsBase + 13'000),
                                            std::pair(T::TYPE_SLICE_END, kIdsBase + 15'000)));
}

// The merged id of each event named `name`, in order; fails for an event
// that also kept an id2.
std::vector<uint64_t> IdsOf(const std::vector<Json>& events, const std::string& name) {
  std::vector<uint64_t> ids;
  for (const Json& e : events) {
    if (e["name"] != name) continue;
    EXPECT_FALSE(e.contains("id2")) << e.dump();
    EXPECT_TRUE(e["id"].is_number_unsigned()) << e.dump();
    ids.push_back(e["id"].get<uint64_t>());
  }
  return ids;
}

TEST_F(MergeIdsTest, JsonWritesOneMergedIdInsteadOfId2) {
  const std::vector<Json> events = JsonEvents(kId2Events);
  ASSERT_EQ(events.size(), 17u);
  auto one_id = [&](const std::string& name) {
    const std::vector<uint64_t> ids = IdsOf(events, name);
    EXPECT_THAT(ids, SizeIs(2)) << name;
    EXPECT_EQ(ids.front(), ids.back()) << name;  // begin and end, s and f, meet
    return ids.front();
  };
  const std::vector<uint64_t> distinct = {
      one_id("local on 100"), one_id("local on 200"), one_id("global"), one_id("plain"),
      one_id("scope a"),      one_id("scope b"),      one_id("hop"),    one_id("local hop")};
  for (size_t i = 0; i < distinct.size(); ++i) {
    for (size_t j = i + 1; j < distinct.size(); ++j) EXPECT_NE(distinct[i], distinct[j]) << i << j;
  }
  EXPECT_EQ(events[8]["scope"], "a");  // the scope is kept beside the merged id
  // An id2 with no id in it is no id: kept as written, no id added.
  const Json& no_id = events[12];
  EXPECT_EQ(no_id["name"], "no id");
  EXPECT_FALSE(no_id.contains("id"));
  EXPECT_EQ(no_id["id2"]["other"], 1);
}

TEST_F(MergeIdsTest, JsonGivesLegacyAsyncSlicesMergedIds) {
  const std::vector<Json> events = JsonEvents(kLegacyAsyncEvents);
  const std::vector<uint64_t> ids = IdsOf(events, "fetch");
  ASSERT_THAT(ids, SizeIs(6));
  EXPECT_EQ(ids[0], ids[2]);  // 0x5: S, T, F
  EXPECT_EQ(ids[0], ids[4]);
  EXPECT_EQ(ids[1], ids[3]);  // 0x6: S, p, F
  EXPECT_EQ(ids[1], ids[5]);
  EXPECT_NE(ids[0], ids[1]);
}

TEST_F(MergeIdsTest, JsonGivesAnObjectOneMergedIdAcrossItsEvents) {
  const std::vector<Json> events = JsonEvents(kObjectEvents);
  ASSERT_EQ(events.size(), 10u);
  // Layer: N, O, D of pid 100, then N, D of pid 200 (merged into one pid,
  // so they need ids of their own).
  const std::vector<uint64_t> layer = IdsOf(events, "Layer");
  ASSERT_THAT(layer, SizeIs(5));
  EXPECT_EQ(layer[0], layer[1]);
  EXPECT_EQ(layer[0], layer[2]);
  EXPECT_EQ(layer[3], layer[4]);
  EXPECT_NE(layer[0], layer[3]);
  const std::vector<uint64_t> frame = IdsOf(events, "Frame");
  ASSERT_THAT(frame, SizeIs(2));
  EXPECT_EQ(frame[0], frame[1]);
  EXPECT_NE(frame[0], layer[0]);  // same id, another object
  const std::vector<uint64_t> buffer = IdsOf(events, "Buffer");
  ASSERT_THAT(buffer, SizeIs(2));
  EXPECT_EQ(buffer[0], buffer[1]);
  EXPECT_EQ(events[2]["args"]["snapshot"]["children"][1], 5);
  EXPECT_FALSE(events[9].contains("id"));  // the snapshot without an id
}

}  // namespace
}  // namespace gpuctl::merge
