// Encode/Decode for the IPC schema (proto/gpuctl/v1/ipc.proto) on top of
// wire_format.h. Semantics follow libprotobuf for proto3: defaults are not
// emitted, fields may come in any order, unknown fields and known fields with
// an unexpected wire type are skipped, a repeated scalar keeps the last value,
// repeated strings append, an embedded message seen twice is merged, and a
// different oneof member replaces the current one.
#include "client_lib/src/wire/ipc_messages.h"

#include <type_traits>
#include <utility>

#include "client_lib/src/wire/wire_format.h"

namespace gpuctl::wire {
namespace {

// ---- Encoding: one field writer per message, used for sizing and output.

template <typename Sink>
void PutFields(Sink& s, const Hello& m) {
  PutVarintField(s, 1, m.protocol_major);
  PutVarintField(s, 2, m.protocol_minor);
  PutStringField(s, 3, m.library_version);
  PutVarintField(s, 4, Int32ToVarint(m.pid));
  PutVarintField(s, 5, Int32ToVarint(m.ppid));
  PutStringField(s, 6, m.job_id);
  PutVarintField(s, 7, Int32ToVarint(m.rank));
  PutVarintField(s, 8, Int32ToVarint(m.local_rank));
  PutVarintField(s, 9, Int32ToVarint(m.world_size));
  PutStringField(s, 10, m.hostname);
  for (const std::string& arg : m.cmdline) {
    PutLengthDelimitedAlways(s, 11, arg);
  }
  PutVarintField(s, 12, m.capabilities);
  for (const std::string& label : m.labels) {
    PutLengthDelimitedAlways(s, 13, label);
  }
  PutVarintField(s, 14, m.step_counter ? 1 : 0);
}

template <typename Sink>
void PutFields(Sink& s, const HelloAck& m) {
  PutVarintField(s, 1, m.protocol_major);
  PutVarintField(s, 2, m.protocol_minor);
  PutStringField(s, 3, m.daemon_version);
  PutVarintField(s, 4, m.max_payload_bytes);
}

template <typename Sink>
void PutFields(Sink& s, const StartCapture& m) {
  PutStringField(s, 1, m.trace_id);
  PutVarintField(s, 2, static_cast<uint64_t>(m.start_time_unix_ns));
  PutVarintField(s, 3, static_cast<uint64_t>(m.duration_ns));
  PutVarintField(s, 4, m.max_buffer_bytes);
  for (const std::string& activity : m.activities) {
    PutLengthDelimitedAlways(s, 5, activity);
  }
  PutVarintField(s, 6, m.activity_buffer_bytes);
  PutVarintField(s, 7, static_cast<uint64_t>(m.max_start_skew_ns));
  PutVarintField(s, 8, m.start_step);
  PutVarintField(s, 9, m.iterations);
}

template <typename Sink>
void PutFields(Sink& s, const CancelCapture& m) {
  PutStringField(s, 1, m.trace_id);
  PutStringField(s, 2, m.reason);
}

template <typename Sink>
void PutFields(Sink& s, const HelloRejected& m) {
  PutVarintField(s, 1, Int32ToVarint(m.reason));
  PutStringField(s, 2, m.message);
  PutVarintField(s, 3, m.protocol_major);
  PutVarintField(s, 4, m.protocol_minor);
}

template <typename Sink>
void PutFields(Sink& s, const CaptureStarted& m) {
  PutStringField(s, 1, m.trace_id);
  PutVarintField(s, 2, static_cast<uint64_t>(m.opened_at_unix_ns));
  PutVarintField(s, 3, m.first_step);
  PutVarintField(s, 4, m.late_start ? 1 : 0);
}

template <typename Sink>
void PutFields(Sink& s, const CaptureResult& m) {
  PutStringField(s, 1, m.trace_id);
  PutVarintField(s, 2, Int32ToVarint(m.status));
  PutStringField(s, 3, m.message);
  PutVarintField(s, 4, Int32ToVarint(m.transport));
  PutVarintField(s, 5, m.payload_size);
  PutVarintField(s, 6, m.event_count);
  PutVarintField(s, 7, m.dropped_events);
  PutVarintField(s, 8, static_cast<uint64_t>(m.window_start_unix_ns));
  PutVarintField(s, 9, static_cast<uint64_t>(m.window_end_unix_ns));
  PutVarintField(s, 10, m.host_only ? 1 : 0);
  PutVarintField(s, 11, m.cupti_dropped_records);
  PutVarintField(s, 12, m.late_start ? 1 : 0);
  PutVarintField(s, 13, m.first_step);
  PutVarintField(s, 14, m.steps);
}

template <typename Sink>
void PutFields(Sink& s, const PayloadChunk& m) {
  PutStringField(s, 1, m.trace_id);
  PutVarintField(s, 2, m.offset);
  PutStringField(s, 3, m.data);
}

template <typename Sink>
void PutFields(Sink& s, const Goodbye& m) {
  PutStringField(s, 1, m.reason);
}

// The oneof member field numbers equal the variant alternative indexes
// (index 0 is std::monostate, "not set"); checked below so a reordering of
// either the proto or the variant cannot go unnoticed.
static_assert(std::is_same_v<std::variant_alternative_t<1, ClientMessage>, Hello>);
static_assert(std::is_same_v<std::variant_alternative_t<2, ClientMessage>, CaptureStarted>);
static_assert(std::is_same_v<std::variant_alternative_t<3, ClientMessage>, CaptureResult>);
static_assert(std::is_same_v<std::variant_alternative_t<4, ClientMessage>, PayloadChunk>);
static_assert(std::is_same_v<std::variant_alternative_t<5, ClientMessage>, Goodbye>);
static_assert(std::variant_size_v<ClientMessage> == 6);
static_assert(std::is_same_v<std::variant_alternative_t<1, DaemonMessage>, HelloAck>);
static_assert(std::is_same_v<std::variant_alternative_t<2, DaemonMessage>, StartCapture>);
static_assert(std::is_same_v<std::variant_alternative_t<3, DaemonMessage>, CancelCapture>);
static_assert(std::is_same_v<std::variant_alternative_t<4, DaemonMessage>, HelloRejected>);
static_assert(std::variant_size_v<DaemonMessage> == 5);

template <typename Variant>
void EncodeOneof(const Variant& message, std::string* out) {
  const auto field_number = static_cast<uint32_t>(message.index());
  std::visit(
      [&](const auto& member) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(member)>, std::monostate>) {
          SizeSink size;
          PutFields(size, member);
          out->reserve(out->size() + 2 * kMaxVarintBytes + size.size());
          StringSink sink(out);
          // A set oneof member is emitted even when all its fields are
          // default: presence is the information.
          sink.PutVarint(MakeTag(field_number, WireType::kLengthDelimited));
          sink.PutVarint(size.size());
          PutFields(sink, member);
        }
      },
      message);
}

// ---- Decoding. Each setter ignores a field whose wire type does not match
// the schema (protobuf keeps it as an unknown field) and fails only where
// protobuf's parse fails: a proto3 string that is not valid UTF-8.

void SetUint32(const WireField& f, uint32_t* value) {
  if (f.type == WireType::kVarint) {
    *value = static_cast<uint32_t>(f.number_value);
  }
}
void SetInt32(const WireField& f, int32_t* value) {
  // Truncation to the low 32 bits, as protobuf reads int32 and enums.
  if (f.type == WireType::kVarint) {
    *value = static_cast<int32_t>(f.number_value);
  }
}
void SetBool(const WireField& f, bool* value) {
  if (f.type == WireType::kVarint) {
    *value = f.number_value != 0;
  }
}
void SetUint64(const WireField& f, uint64_t* value) {
  if (f.type == WireType::kVarint) {
    *value = f.number_value;
  }
}
void SetInt64(const WireField& f, int64_t* value) {
  if (f.type == WireType::kVarint) {
    *value = static_cast<int64_t>(f.number_value);
  }
}
bool SetString(const WireField& f, std::string* value) {
  if (f.type != WireType::kLengthDelimited) {
    return true;
  }
  if (!IsValidUtf8(f.bytes)) {
    return false;
  }
  value->assign(f.bytes);
  return true;
}
void SetBytes(const WireField& f, std::string* value) {
  if (f.type == WireType::kLengthDelimited) {
    value->assign(f.bytes);
  }
}
bool AddString(const WireField& f, std::vector<std::string>* values) {
  if (f.type != WireType::kLengthDelimited) {
    return true;
  }
  if (!IsValidUtf8(f.bytes)) {
    return false;
  }
  values->emplace_back(f.bytes);
  return true;
}

bool MergeField(const WireField& f, Hello* m) {
  switch (f.field_number) {
    case 1:
      SetUint32(f, &m->protocol_major);
      break;
    case 2:
      SetUint32(f, &m->protocol_minor);
      break;
    case 3:
      return SetString(f, &m->library_version);
    case 4:
      SetInt32(f, &m->pid);
      break;
    case 5:
      SetInt32(f, &m->ppid);
      break;
    case 6:
      return SetString(f, &m->job_id);
    case 7:
      SetInt32(f, &m->rank);
      break;
    case 8:
      SetInt32(f, &m->local_rank);
      break;
    case 9:
      SetInt32(f, &m->world_size);
      break;
    case 10:
      return SetString(f, &m->hostname);
    case 11:
      return AddString(f, &m->cmdline);
    case 12:
      SetUint64(f, &m->capabilities);
      break;
    case 13:
      return AddString(f, &m->labels);
    case 14:
      SetBool(f, &m->step_counter);
      break;
    default:
      break;
  }
  return true;
}

bool MergeField(const WireField& f, HelloAck* m) {
  switch (f.field_number) {
    case 1:
      SetUint32(f, &m->protocol_major);
      break;
    case 2:
      SetUint32(f, &m->protocol_minor);
      break;
    case 3:
      return SetString(f, &m->daemon_version);
    case 4:
      SetUint64(f, &m->max_payload_bytes);
      break;
    default:
      break;
  }
  return true;
}

bool MergeField(const WireField& f, StartCapture* m) {
  switch (f.field_number) {
    case 1:
      return SetString(f, &m->trace_id);
    case 2:
      SetInt64(f, &m->start_time_unix_ns);
      break;
    case 3:
      SetInt64(f, &m->duration_ns);
      break;
    case 4:
      SetUint64(f, &m->max_buffer_bytes);
      break;
    case 5:
      return AddString(f, &m->activities);
    case 6:
      SetUint64(f, &m->activity_buffer_bytes);
      break;
    case 7:
      SetInt64(f, &m->max_start_skew_ns);
      break;
    case 8:
      SetUint64(f, &m->start_step);
      break;
    case 9:
      SetUint32(f, &m->iterations);
      break;
    default:
      break;
  }
  return true;
}

bool MergeField(const WireField& f, CancelCapture* m) {
  switch (f.field_number) {
    case 1:
      return SetString(f, &m->trace_id);
    case 2:
      return SetString(f, &m->reason);
    default:
      break;
  }
  return true;
}

bool MergeField(const WireField& f, HelloRejected* m) {
  switch (f.field_number) {
    case 1:
      SetInt32(f, &m->reason);
      break;
    case 2:
      return SetString(f, &m->message);
    case 3:
      SetUint32(f, &m->protocol_major);
      break;
    case 4:
      SetUint32(f, &m->protocol_minor);
      break;
    default:
      break;
  }
  return true;
}

bool MergeField(const WireField& f, CaptureStarted* m) {
  switch (f.field_number) {
    case 1:
      return SetString(f, &m->trace_id);
    case 2:
      SetInt64(f, &m->opened_at_unix_ns);
      break;
    case 3:
      SetUint64(f, &m->first_step);
      break;
    case 4:
      SetBool(f, &m->late_start);
      break;
    default:
      break;
  }
  return true;
}

bool MergeField(const WireField& f, CaptureResult* m) {
  switch (f.field_number) {
    case 1:
      return SetString(f, &m->trace_id);
    case 2:
      SetInt32(f, &m->status);
      break;
    case 3:
      return SetString(f, &m->message);
    case 4:
      SetInt32(f, &m->transport);
      break;
    case 5:
      SetUint64(f, &m->payload_size);
      break;
    case 6:
      SetUint64(f, &m->event_count);
      break;
    case 7:
      SetUint64(f, &m->dropped_events);
      break;
    case 8:
      SetInt64(f, &m->window_start_unix_ns);
      break;
    case 9:
      SetInt64(f, &m->window_end_unix_ns);
      break;
    case 10:
      SetBool(f, &m->host_only);
      break;
    case 11:
      SetUint64(f, &m->cupti_dropped_records);
      break;
    case 12:
      SetBool(f, &m->late_start);
      break;
    case 13:
      SetUint64(f, &m->first_step);
      break;
    case 14:
      SetUint32(f, &m->steps);
      break;
    default:
      break;
  }
  return true;
}

bool MergeField(const WireField& f, PayloadChunk* m) {
  switch (f.field_number) {
    case 1:
      return SetString(f, &m->trace_id);
    case 2:
      SetUint64(f, &m->offset);
      break;
    case 3:
      SetBytes(f, &m->data);
      break;
    default:
      break;
  }
  return true;
}

bool MergeField(const WireField& f, Goodbye* m) {
  if (f.field_number == 1) {
    return SetString(f, &m->reason);
  }
  return true;
}

// Parses `bytes` into `message` without clearing it first: this is what
// gives protobuf's merge semantics when an embedded message appears twice.
template <typename Message>
bool MergeMessage(std::string_view bytes, Message* message) {
  WireReader reader(bytes);
  WireField field;
  while (!reader.AtEnd()) {
    if (!reader.ReadField(&field) || !MergeField(field, message)) {
      return false;
    }
  }
  return true;
}

template <typename Variant, size_t kIndex = 1>
bool MergeOneofMember(uint32_t field_number, std::string_view bytes, Variant* out) {
  if constexpr (kIndex == std::variant_size_v<Variant>) {
    return true;  // an unknown oneof member from a newer peer: skipped
  } else {
    if (field_number != kIndex) {
      return MergeOneofMember<Variant, kIndex + 1>(field_number, bytes, out);
    }
    if (out->index() != kIndex) {
      out->template emplace<kIndex>();
    }
    return MergeMessage(bytes, std::get_if<kIndex>(out));
  }
}

template <typename Variant>
bool DecodeOneof(std::string_view bytes, Variant* out) {
  *out = std::monostate{};
  WireReader reader(bytes);
  WireField field;
  while (!reader.AtEnd()) {
    const bool ok =
        reader.ReadField(&field) && (field.type != WireType::kLengthDelimited ||
                                     MergeOneofMember(field.field_number, field.bytes, out));
    if (!ok) {
      *out = std::monostate{};
      return false;
    }
  }
  return true;
}

}  // namespace

void Encode(const ClientMessage& message, std::string* out) { EncodeOneof(message, out); }
void Encode(const DaemonMessage& message, std::string* out) { EncodeOneof(message, out); }

bool Decode(std::string_view bytes, ClientMessage* out) { return DecodeOneof(bytes, out); }
bool Decode(std::string_view bytes, DaemonMessage* out) { return DecodeOneof(bytes, out); }

}  // namespace gpuctl::wire
