// The merged trace in Perfetto's protobuf format: a stream of TracePackets
// (proto/perfetto/), each rank a process track, each of its rows a thread
// track, its counters counter tracks; CPU samples also perf samples whose
// callstacks Perfetto aggregates into flame graphs; names and callstacks
// interned on one sequence.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "daemon/merge/callstack_interner.h"
#include "daemon/merge/clock_offsets.h"
#include "daemon/merge/merge_output.h"
#include "google/protobuf/io/coded_stream.h"
#include "protos/perfetto/trace/perfetto_trace.pb.h"

namespace gpuctl::merge {
namespace {

namespace pp = ::perfetto::protos;

constexpr uint32_t kSequenceId = 1;
// Names interned per kind at most; past this they are written inline, so a
// trace of endless distinct names cannot grow the tables without bound.
constexpr size_t kMaxInterned = 1'000'000;
// A rank's async tracks take uuids from process_uuid + 2^30, its object
// tracks from process_uuid + 2^29 (its rows lie below 2^20 past it, its
// counters from 2^31); at most this many of each per rank.
constexpr uint64_t kAsyncTrackBase = uint64_t{1} << 30;
constexpr uint64_t kMaxAsyncTracksPerRank = 1'000'000;
constexpr uint64_t kObjectTrackBase = uint64_t{1} << 29;
constexpr uint64_t kMaxObjectTracksPerRank = 1'000'000;
// A rank's counter tracks (from process_uuid + 2^31), at most this many;
// values of counters past it are dropped and the event counted unsupported.
constexpr uint64_t kMaxCounterTracksPerRank = 1'000'000;
// Trace.packet is field 1, length-delimited: tag (1 << 3) | 2.
constexpr uint8_t kPacketTag = 0x0a;

// One interning table: a name's iid, and whether the table is full.
class Interner {
 public:
  // The iid of `name`, adding it to the table (and to `added`) when new;
  // 0 when the table is full and `name` is not in it.
  template <typename Entry>
  uint64_t Intern(const std::string& name, google::protobuf::RepeatedPtrField<Entry>* added) {
    auto it = iids_.find(name);
    if (it != iids_.end()) return it->second;
    if (iids_.size() >= kMaxInterned) return 0;
    const uint64_t iid = iids_.size() + 1;
    iids_.emplace(name, iid);
    Entry* entry = added->Add();
    entry->set_iid(iid);
    entry->set_name(name);
    return iid;
  }

 private:
  absl::flat_hash_map<std::string, uint64_t> iids_;
};

class ProtoSink : public MergeSink {
 public:
  explicit ProtoSink(MergeOutput* out) : out_(out) {}

  absl::Status BeginRank(const RankPlan& rank) override {
    counters_.clear();
    async_tracks_.clear();
    object_tracks_.clear();
    pp::TracePacket packet;
    pp::TrackDescriptor* process = Descriptor(packet, rank.process_uuid);
    process->mutable_process()->set_pid(static_cast<int32_t>(rank.merged_pid));
    process->mutable_process()->set_process_name(rank.process_name);
    process->mutable_process()->add_process_labels(rank.labels);
    process->set_description(absl::StrCat(
        "file ", rank.path, "; ", rank.labels,
        rank.clock.has_value()
            ? absl::StrCat("; times moved onto the caller's clock, ", AlignmentBound(*rank.clock))
            : ""));
    if (absl::Status s = WritePacket(packet); !s.ok()) return s;
    for (const RankRow& row : rank.rows) {
      packet.Clear();
      pp::TrackDescriptor* track = Descriptor(packet, row.uuid);
      track->set_parent_uuid(rank.process_uuid);
      pp::ThreadDescriptor* thread = track->mutable_thread();
      thread->set_pid(static_cast<int32_t>(rank.merged_pid));
      thread->set_tid(row.merged_tid);
      thread->set_thread_name(row.name);
      if (absl::Status s = WritePacket(packet); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Event(const RankPlan& rank, const MergeEvent& e) override {
    if (e.aligned_ns < 0) return false;  // before 1970: not a Perfetto timestamp
    const char ph = e.ph.size() == 1 ? e.ph[0] : '\0';
    switch (ph) {
      case 'X':
        if (absl::Status s = Slice(e, pp::TrackEvent::TYPE_SLICE_BEGIN, e.aligned_ns); !s.ok()) {
          return s;
        }
        if (absl::Status s = Slice(e, pp::TrackEvent::TYPE_SLICE_END, e.aligned_ns + *e.dur_ns);
            !s.ok()) {
          return s;
        }
        return true;
      case 'B':
        return WriteOk(Slice(e, pp::TrackEvent::TYPE_SLICE_BEGIN, e.aligned_ns));
      case 'E':
        return WriteOk(Slice(e, pp::TrackEvent::TYPE_SLICE_END, e.aligned_ns));
      case 'i':
        if (absl::Status s = Slice(e, pp::TrackEvent::TYPE_INSTANT, e.aligned_ns); !s.ok()) {
          return s;
        }
        if (absl::Status s = Sample(rank, e); !s.ok()) return s;
        return true;
      case 'I':
      case 's':
      case 't':
      case 'f':
        return WriteOk(Slice(e, pp::TrackEvent::TYPE_INSTANT, e.aligned_ns));
      case 'b':
      case 'e':
      case 'n':
      case 'S':  // the legacy async phases: start, step into, step past, finish
      case 'T':
      case 'p':
      case 'F': {
        absl::StatusOr<uint64_t> track = AsyncTrack(rank, e);
        if (!track.ok()) return track.status();
        if (*track == 0) return false;
        const pp::TrackEvent::Type type = ph == 'b' || ph == 'S' ? pp::TrackEvent::TYPE_SLICE_BEGIN
                                          : ph == 'e' || ph == 'F' ? pp::TrackEvent::TYPE_SLICE_END
                                                                   : pp::TrackEvent::TYPE_INSTANT;
        return WriteOk(Slice(e, type, e.aligned_ns, *track));
      }
      case 'N':
      case 'O':
      case 'D': {
        absl::StatusOr<uint64_t> track = ObjectTrack(rank, e);
        if (!track.ok()) return track.status();
        if (*track == 0) return false;
        const pp::TrackEvent::Type type = ph == 'N'   ? pp::TrackEvent::TYPE_SLICE_BEGIN
                                          : ph == 'D' ? pp::TrackEvent::TYPE_SLICE_END
                                                      : pp::TrackEvent::TYPE_INSTANT;
        return WriteOk(Slice(e, type, e.aligned_ns, *track));
      }
      case 'C':
        return Counters(rank, e);
      default:
        return false;
    }
  }

  absl::Status Finish(const Json& /*metadata*/) override { return absl::OkStatus(); }

 private:
  static absl::StatusOr<bool> WriteOk(absl::Status s) {
    if (!s.ok()) return s;
    return true;
  }

  // A descriptor packet on the sequence; the first one also starts the
  // sequence's interning state.
  pp::TrackDescriptor* Descriptor(pp::TracePacket& packet, uint64_t uuid) {
    packet.set_trusted_packet_sequence_id(kSequenceId);
    if (!sequence_started_) {
      packet.set_sequence_flags(pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
      sequence_started_ = true;
    }
    pp::TrackDescriptor* track = packet.mutable_track_descriptor();
    track->set_uuid(uuid);
    return track;
  }

  // The track of an async event's id (b, e, n: Chrome's nestable async
  // events; S, T, p, F: its legacy ones), one track per category and id within a rank, the id
  // scoped as MergedId scopes it, as the JSON importer keeps them), a child of the rank's process
  // track named after its first event; its descriptor is written before its first event. 0 for an
  // event without an id, and past kMaxAsyncTracksPerRank.
  absl::StatusOr<uint64_t> AsyncTrack(const RankPlan& rank, const MergeEvent& e) {
    return IdTrack(rank, e, /*object=*/false, kAsyncTrackBase, kMaxAsyncTracksPerRank,
                   async_tracks_);
  }

  // The track of an object (N, O, D: one per category, name and id within
  // a rank, the id scoped as MergedId scopes it), a child of the rank's
  // process track named "<name> <id>"; its descriptor is written before its
  // first event. 0 for an event without an id, and past
  // kMaxObjectTracksPerRank.
  absl::StatusOr<uint64_t> ObjectTrack(const RankPlan& rank, const MergeEvent& e) {
    return IdTrack(rank, e, /*object=*/true, kObjectTrackBase, kMaxObjectTracksPerRank,
                   object_tracks_);
  }

  // The uuid of the track `tracks` holds for `e`'s merged id, else a new
  // one from process_uuid + `base`, described here and named after `e`
  // (and its id as written, for an `object`); 0 for an event without an
  // id, and once `tracks` holds `max`.
  absl::StatusOr<uint64_t> IdTrack(const RankPlan& rank, const MergeEvent& e, bool object,
                                   uint64_t base, uint64_t max,
                                   absl::flat_hash_map<uint64_t, uint64_t>& tracks) {
    if (!e.merged_id.has_value()) return uint64_t{0};
    if (auto it = tracks.find(*e.merged_id); it != tracks.end()) return it->second;
    if (tracks.size() >= max) return uint64_t{0};
    const uint64_t uuid = rank.process_uuid + base + tracks.size();
    tracks.emplace(*e.merged_id, uuid);
    pp::TracePacket packet;
    pp::TrackDescriptor* track = Descriptor(packet, uuid);
    track->set_parent_uuid(rank.process_uuid);
    std::string name = Text(e.streamed->value.value("name", Json()));
    if (object) absl::StrAppend(&name, " ", Text(*e.id));
    track->set_name(std::move(name));
    if (absl::Status s = WritePacket(packet); !s.ok()) return s;
    return uuid;
  }

  // A string as it is, any other JSON value as its text.
  static std::string Text(const Json& value) {
    return value.is_string() ? value.get<std::string>() : value.dump();
  }

  // A track event on the row's track (or `track`): a slice's begin (with
  // the args) or end, or an instant; flow ids of s/t (leaving) and f
  // (arriving) events.
  absl::Status Slice(const MergeEvent& e, pp::TrackEvent::Type type, int64_t ts,
                     uint64_t track = 0) {
    pp::TracePacket packet;
    pp::TrackEvent* event = EventPacket(packet, ts);
    event->set_type(type);
    event->set_track_uuid(track != 0 ? track : e.row->uuid);
    if (type != pp::TrackEvent::TYPE_SLICE_END) {
      const Json& value = e.streamed->value;
      Name(packet, event, value.value("name", Json()));
      if (auto cat = value.find("cat"); cat != value.end() && cat->is_string()) {
        const std::string c = cat->get<std::string>();
        if (uint64_t iid =
                categories_.Intern(c, packet.mutable_interned_data()->mutable_event_categories());
            iid != 0) {
          event->add_category_iids(iid);
        } else {
          event->add_categories(c);
        }
      }
      if (auto args = value.find("args"); args != value.end() && args->is_object()) {
        for (const auto& [key, arg] : args->items()) {
          pp::DebugAnnotation* a = event->add_debug_annotations();
          if (uint64_t iid = annotation_names_.Intern(
                  key, packet.mutable_interned_data()->mutable_debug_annotation_names());
              iid != 0) {
            a->set_name_iid(iid);
          } else {
            a->set_name(key);
          }
          SetValue(arg, a);
        }
      }
      if (e.merged_id.has_value()) {
        if (e.ph == "f") {
          event->add_terminating_flow_ids(*e.merged_id);
        } else if (e.ph == "s" || e.ph == "t") {
          event->add_flow_ids(*e.merged_id);
        }
      }
    }
    return WritePacket(packet);
  }

  // A cpu_sample instant as a perf sample too: the instant keeps the sample
  // on its thread's track beside the thread's slices, the perf sample's
  // interned callstack is what Perfetto's flame graphs aggregate. A sample
  // whose stack cannot be interned (no stack, tables full) or whose merged
  // ids do not fit PerfSample's fields stays an instant only.
  absl::Status Sample(const RankPlan& rank, const MergeEvent& e) {
    const Json& value = e.streamed->value;
    auto cat = value.find("cat");
    if (cat == value.end() || *cat != "cpu_sample") return absl::OkStatus();
    auto args = value.find("args");
    if (args == value.end() || !args->is_object()) return absl::OkStatus();
    auto stack = args->find("stack");
    if (stack == args->end()) return absl::OkStatus();
    if (rank.merged_pid < 0 || rank.merged_pid > int64_t{UINT32_MAX} || e.row->merged_tid < 0 ||
        e.row->merged_tid > int64_t{UINT32_MAX}) {
      return absl::OkStatus();
    }
    pp::TracePacket packet;
    const uint64_t callstack = callstacks_.Intern(*stack, packet.mutable_interned_data());
    if (callstack == 0) {
      // Entries a failed stack added are still valid interned data.
      if (packet.interned_data().ByteSizeLong() == 0) return absl::OkStatus();
    }
    packet.set_timestamp(static_cast<uint64_t>(e.aligned_ns));
    packet.set_trusted_packet_sequence_id(kSequenceId);
    packet.set_sequence_flags(pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    if (callstack == 0) return WritePacket(packet);
    pp::PerfSample* sample = packet.mutable_perf_sample();
    sample->set_pid(static_cast<uint32_t>(rank.merged_pid));
    sample->set_tid(static_cast<uint32_t>(e.row->merged_tid));
    sample->set_callstack_iid(callstack);
    return WritePacket(packet);
  }

  // Each numeric arg of a C event is a counter of its own, "<name> <arg>"
  // (as Perfetto's JSON importer names them), on the rank's process; at most
  // kMaxCounterTracksPerRank of them.
  absl::StatusOr<bool> Counters(const RankPlan& rank, const MergeEvent& e) {
    const Json& value = e.streamed->value;
    auto args = value.find("args");
    if (args == value.end() || !args->is_object()) return false;
    const Json name = value.value("name", Json());
    const std::string prefix = name.is_string() ? name.get<std::string>() : name.dump();
    bool wrote = false;
    for (const auto& [key, arg] : args->items()) {
      if (!arg.is_number()) continue;
      const std::string track_name = absl::StrCat(prefix, " ", key);
      if (counters_.size() >= kMaxCounterTracksPerRank && !counters_.contains(track_name)) {
        continue;
      }
      auto [it, added] = counters_.try_emplace(
          track_name, rank.process_uuid + (uint64_t{1} << 31) + counters_.size());
      if (added) {
        pp::TracePacket packet;
        pp::TrackDescriptor* track = Descriptor(packet, it->second);
        track->set_parent_uuid(rank.process_uuid);
        track->set_name(track_name);
        track->mutable_counter();
        if (absl::Status s = WritePacket(packet); !s.ok()) return s;
      }
      pp::TracePacket packet;
      pp::TrackEvent* event = EventPacket(packet, e.aligned_ns);
      event->set_type(pp::TrackEvent::TYPE_COUNTER);
      event->set_track_uuid(it->second);
      const bool fits_int64 = arg.is_number_unsigned() ? arg.get<uint64_t>() <= uint64_t{INT64_MAX}
                                                       : arg.is_number_integer();
      if (fits_int64) {
        event->set_counter_value(arg.get<int64_t>());
      } else {
        event->set_double_counter_value(arg.get<double>());
      }
      if (absl::Status s = WritePacket(packet); !s.ok()) return s;
      wrote = true;
    }
    return wrote;
  }

  pp::TrackEvent* EventPacket(pp::TracePacket& packet, int64_t ts) {
    packet.set_timestamp(static_cast<uint64_t>(ts));
    packet.set_trusted_packet_sequence_id(kSequenceId);
    packet.set_sequence_flags(pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    return packet.mutable_track_event();
  }

  void Name(pp::TracePacket& packet, pp::TrackEvent* event, const Json& name) {
    const std::string text = name.is_string() ? name.get<std::string>() : name.dump();
    if (uint64_t iid =
            event_names_.Intern(text, packet.mutable_interned_data()->mutable_event_names());
        iid != 0) {
      event->set_name_iid(iid);
    } else {
      event->set_name(text);
    }
  }

  // A JSON value as a debug annotation's value: objects and arrays nested.
  static void SetValue(const Json& v, pp::DebugAnnotation* a) {
    if (v.is_boolean()) {
      a->set_bool_value(v.get<bool>());
    } else if (v.is_number_unsigned()) {
      a->set_uint_value(v.get<uint64_t>());
    } else if (v.is_number_integer()) {
      a->set_int_value(v.get<int64_t>());
    } else if (v.is_number_float()) {
      a->set_double_value(v.get<double>());
    } else if (v.is_string()) {
      a->set_string_value(v.get<std::string>());
    } else if (v.is_object()) {
      for (const auto& [key, item] : v.items()) {
        pp::DebugAnnotation* entry = a->add_dict_entries();
        entry->set_name(key);
        SetValue(item, entry);
      }
    } else if (v.is_array()) {
      for (const Json& item : v) SetValue(item, a->add_array_values());
    } else {
      a->set_legacy_json_value("null");
    }
  }

  absl::Status WritePacket(const pp::TracePacket& packet) {
    std::string bytes;
    if (!packet.SerializeToString(&bytes)) {
      return absl::InternalError("a merged trace packet could not be serialized");
    }
    std::string frame(1, static_cast<char>(kPacketTag));
    uint8_t varint[10];
    uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
        static_cast<uint32_t>(bytes.size()), varint);
    frame.append(varint, end);
    frame.append(bytes);
    return out_->Write(frame);
  }

  MergeOutput* out_;
  bool sequence_started_ = false;
  Interner event_names_, categories_, annotation_names_;
  CallstackInterner callstacks_;
  absl::flat_hash_map<std::string, uint64_t> counters_;    // this rank's, by track name
  absl::flat_hash_map<uint64_t, uint64_t> async_tracks_;   // this rank's, by merged id
  absl::flat_hash_map<uint64_t, uint64_t> object_tracks_;  // this rank's, by merged id
};

}  // namespace

std::unique_ptr<MergeSink> NewProtoSink(MergeOutput* out) {
  return std::make_unique<ProtoSink>(out);
}

}  // namespace gpuctl::merge
