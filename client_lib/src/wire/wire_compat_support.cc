#include "client_lib/src/wire/wire_compat_support.h"

#include <limits>

namespace gpuctl::wire::testing {
namespace {

void Fill(const Hello& in, pb::Hello* out) {
  out->set_protocol_major(in.protocol_major);
  out->set_protocol_minor(in.protocol_minor);
  out->set_library_version(in.library_version);
  out->set_pid(in.pid);
  out->set_ppid(in.ppid);
  out->set_job_id(in.job_id);
  out->set_rank(in.rank);
  out->set_local_rank(in.local_rank);
  out->set_world_size(in.world_size);
  out->set_hostname(in.hostname);
  for (const std::string& arg : in.cmdline) {
    out->add_cmdline(arg);
  }
  out->set_capabilities(in.capabilities);
  for (const std::string& label : in.labels) {
    out->add_labels(label);
  }
  out->set_step_counter(in.step_counter);
}

void Fill(const CaptureStarted& in, pb::CaptureStarted* out) {
  out->set_trace_id(in.trace_id);
  out->set_opened_at_unix_ns(in.opened_at_unix_ns);
  out->set_first_step(in.first_step);
  out->set_late_start(in.late_start);
}

void Fill(const CaptureResult& in, pb::CaptureResult* out) {
  out->set_trace_id(in.trace_id);
  out->set_status(static_cast<::gpuctl::v1::CaptureStatus>(in.status));
  out->set_message(in.message);
  out->set_transport(static_cast<pb::PayloadTransport>(in.transport));
  out->set_payload_size(in.payload_size);
  out->set_event_count(in.event_count);
  out->set_dropped_events(in.dropped_events);
  out->set_window_start_unix_ns(in.window_start_unix_ns);
  out->set_window_end_unix_ns(in.window_end_unix_ns);
  out->set_host_only(in.host_only);
  out->set_cupti_dropped_records(in.cupti_dropped_records);
  out->set_late_start(in.late_start);
  out->set_first_step(in.first_step);
  out->set_steps(in.steps);
}

void Fill(const PayloadChunk& in, pb::PayloadChunk* out) {
  out->set_trace_id(in.trace_id);
  out->set_offset(in.offset);
  out->set_data(in.data);
}

void Fill(const Goodbye& in, pb::Goodbye* out) { out->set_reason(in.reason); }

void Fill(const HelloAck& in, pb::HelloAck* out) {
  out->set_protocol_major(in.protocol_major);
  out->set_protocol_minor(in.protocol_minor);
  out->set_daemon_version(in.daemon_version);
  out->set_max_payload_bytes(in.max_payload_bytes);
}

void Fill(const StartCapture& in, pb::StartCapture* out) {
  out->set_trace_id(in.trace_id);
  out->set_start_time_unix_ns(in.start_time_unix_ns);
  out->set_duration_ns(in.duration_ns);
  out->set_max_buffer_bytes(in.max_buffer_bytes);
  for (const std::string& activity : in.activities) {
    out->add_activities(activity);
  }
  out->set_activity_buffer_bytes(in.activity_buffer_bytes);
  out->set_max_start_skew_ns(in.max_start_skew_ns);
  out->set_start_step(in.start_step);
  out->set_iterations(in.iterations);
}

void Fill(const CancelCapture& in, pb::CancelCapture* out) {
  out->set_trace_id(in.trace_id);
  out->set_reason(in.reason);
}

void Fill(const HelloRejected& in, pb::HelloRejected* out) {
  // Unknown enum values are kept by proto3, as by the codec.
  out->set_reason(static_cast<pb::RejectReason>(in.reason));
  out->set_message(in.message);
  out->set_protocol_major(in.protocol_major);
  out->set_protocol_minor(in.protocol_minor);
}

Hello Convert(const pb::Hello& in) {
  Hello out;
  out.protocol_major = in.protocol_major();
  out.protocol_minor = in.protocol_minor();
  out.library_version = in.library_version();
  out.pid = in.pid();
  out.ppid = in.ppid();
  out.job_id = in.job_id();
  out.rank = in.rank();
  out.local_rank = in.local_rank();
  out.world_size = in.world_size();
  out.hostname = in.hostname();
  out.cmdline.assign(in.cmdline().begin(), in.cmdline().end());
  out.capabilities = in.capabilities();
  out.labels.assign(in.labels().begin(), in.labels().end());
  out.step_counter = in.step_counter();
  return out;
}

CaptureStarted Convert(const pb::CaptureStarted& in) {
  return CaptureStarted{.trace_id = in.trace_id(),
                        .opened_at_unix_ns = in.opened_at_unix_ns(),
                        .first_step = in.first_step(),
                        .late_start = in.late_start()};
}

CaptureResult Convert(const pb::CaptureResult& in) {
  return CaptureResult{.trace_id = in.trace_id(),
                       .status = in.status(),
                       .message = in.message(),
                       .transport = in.transport(),
                       .payload_size = in.payload_size(),
                       .event_count = in.event_count(),
                       .dropped_events = in.dropped_events(),
                       .window_start_unix_ns = in.window_start_unix_ns(),
                       .window_end_unix_ns = in.window_end_unix_ns(),
                       .host_only = in.host_only(),
                       .cupti_dropped_records = in.cupti_dropped_records(),
                       .late_start = in.late_start(),
                       .first_step = in.first_step(),
                       .steps = in.steps()};
}

PayloadChunk Convert(const pb::PayloadChunk& in) {
  return PayloadChunk{.trace_id = in.trace_id(), .offset = in.offset(), .data = in.data()};
}

Goodbye Convert(const pb::Goodbye& in) { return Goodbye{.reason = in.reason()}; }

HelloAck Convert(const pb::HelloAck& in) {
  return HelloAck{.protocol_major = in.protocol_major(),
                  .protocol_minor = in.protocol_minor(),
                  .daemon_version = in.daemon_version(),
                  .max_payload_bytes = in.max_payload_bytes()};
}

StartCapture Convert(const pb::StartCapture& in) {
  return StartCapture{.trace_id = in.trace_id(),
                      .start_time_unix_ns = in.start_time_unix_ns(),
                      .duration_ns = in.duration_ns(),
                      .max_buffer_bytes = in.max_buffer_bytes(),
                      .activities = {in.activities().begin(), in.activities().end()},
                      .activity_buffer_bytes = in.activity_buffer_bytes(),
                      .max_start_skew_ns = in.max_start_skew_ns(),
                      .start_step = in.start_step(),
                      .iterations = in.iterations()};
}

CancelCapture Convert(const pb::CancelCapture& in) {
  return CancelCapture{.trace_id = in.trace_id(), .reason = in.reason()};
}

HelloRejected Convert(const pb::HelloRejected& in) {
  return HelloRejected{.reason = in.reason(),
                       .message = in.message(),
                       .protocol_major = in.protocol_major(),
                       .protocol_minor = in.protocol_minor()};
}

}  // namespace

pb::ClientMessage ToProto(const ClientMessage& message) {
  pb::ClientMessage out;
  if (const auto* m = std::get_if<Hello>(&message)) {
    Fill(*m, out.mutable_hello());
  }
  if (const auto* m = std::get_if<CaptureStarted>(&message)) {
    Fill(*m, out.mutable_capture_started());
  }
  if (const auto* m = std::get_if<CaptureResult>(&message)) {
    Fill(*m, out.mutable_capture_result());
  }
  if (const auto* m = std::get_if<PayloadChunk>(&message)) {
    Fill(*m, out.mutable_payload_chunk());
  }
  if (const auto* m = std::get_if<Goodbye>(&message)) {
    Fill(*m, out.mutable_goodbye());
  }
  return out;
}

pb::DaemonMessage ToProto(const DaemonMessage& message) {
  pb::DaemonMessage out;
  if (const auto* m = std::get_if<HelloAck>(&message)) {
    Fill(*m, out.mutable_hello_ack());
  }
  if (const auto* m = std::get_if<StartCapture>(&message)) {
    Fill(*m, out.mutable_start_capture());
  }
  if (const auto* m = std::get_if<CancelCapture>(&message)) {
    Fill(*m, out.mutable_cancel_capture());
  }
  if (const auto* m = std::get_if<HelloRejected>(&message)) {
    Fill(*m, out.mutable_hello_rejected());
  }
  return out;
}

ClientMessage FromProto(const pb::ClientMessage& message) {
  switch (message.msg_case()) {
    case pb::ClientMessage::kHello:
      return Convert(message.hello());
    case pb::ClientMessage::kCaptureStarted:
      return Convert(message.capture_started());
    case pb::ClientMessage::kCaptureResult:
      return Convert(message.capture_result());
    case pb::ClientMessage::kPayloadChunk:
      return Convert(message.payload_chunk());
    case pb::ClientMessage::kGoodbye:
      return Convert(message.goodbye());
    case pb::ClientMessage::MSG_NOT_SET:
      break;
  }
  return std::monostate{};
}

DaemonMessage FromProto(const pb::DaemonMessage& message) {
  switch (message.msg_case()) {
    case pb::DaemonMessage::kHelloAck:
      return Convert(message.hello_ack());
    case pb::DaemonMessage::kStartCapture:
      return Convert(message.start_capture());
    case pb::DaemonMessage::kCancelCapture:
      return Convert(message.cancel_capture());
    case pb::DaemonMessage::kHelloRejected:
      return Convert(message.hello_rejected());
    case pb::DaemonMessage::MSG_NOT_SET:
      break;
  }
  return std::monostate{};
}

int32_t RandomMessages::Int32() {
  switch (Below(6)) {
    case 0:
      return 0;
    case 1:
      return -1;
    case 2:
      return std::numeric_limits<int32_t>::min();
    case 3:
      return std::numeric_limits<int32_t>::max();
    case 4:
      return static_cast<int32_t>(Below(200)) - 100;
    default:
      return static_cast<int32_t>(rng_());
  }
}

int64_t RandomMessages::Int64() {
  switch (Below(6)) {
    case 0:
      return 0;
    case 1:
      return -1;
    case 2:
      return std::numeric_limits<int64_t>::min();
    case 3:
      return std::numeric_limits<int64_t>::max();
    case 4:
      return static_cast<int64_t>(Below(1u << 20)) - (1 << 19);
    default:
      return static_cast<int64_t>(rng_());
  }
}

uint32_t RandomMessages::Uint32() {
  switch (Below(4)) {
    case 0:
      return 0;
    case 1:
      return std::numeric_limits<uint32_t>::max();
    case 2:
      return static_cast<uint32_t>(Below(300));
    default:
      return static_cast<uint32_t>(rng_());
  }
}

uint64_t RandomMessages::Uint64() {
  switch (Below(4)) {
    case 0:
      return 0;
    case 1:
      return std::numeric_limits<uint64_t>::max();
    case 2:
      return Below(1u << 14);
    default:
      return rng_() >> Below(64);
  }
}

uint32_t RandomMessages::CodePoint() {
  switch (Below(5)) {
    case 0:
      return static_cast<uint32_t>(Below(0x80));  // ASCII, NUL included
    case 1:
      return 0x80 + static_cast<uint32_t>(Below(0x780));  // two bytes
    case 2: {                                             // three bytes, no surrogates
      uint32_t cp = 0x800 + static_cast<uint32_t>(Below(0x10000 - 0x800 - 0x800));
      return cp >= 0xd800 ? cp + 0x800 : cp;
    }
    case 3:
      return 0x10000 + static_cast<uint32_t>(Below(0x100000));  // four bytes
    default:
      return "gpuctl-/._ "[Below(11)];
  }
}

std::string RandomMessages::Utf8String() {
  std::string out;
  if (OneIn(3)) {
    return out;
  }
  const uint64_t length = OneIn(10) ? Below(300) : Below(24);
  for (uint64_t i = 0; i < length; ++i) {
    const uint32_t cp = CodePoint();
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  return out;
}

std::string RandomMessages::Binary() {
  std::string out;
  if (OneIn(4)) {
    return out;
  }
  const uint64_t length = OneIn(8) ? Below(5000) : Below(64);
  for (uint64_t i = 0; i < length; ++i) {
    out.push_back(static_cast<char>(Below(256)));
  }
  return out;
}

ClientMessage RandomMessages::Client(int alternative) {
  const uint64_t index = alternative < 0 ? Below(6) : static_cast<uint64_t>(alternative);
  switch (index) {
    case 1: {
      Hello m{Uint32(),     Uint32(), Utf8String(), Int32(), Int32(),
              Utf8String(), Int32(),  Int32(),      Int32(), Utf8String()};
      const uint64_t args = Below(6);
      for (uint64_t i = 0; i < args; ++i) {
        m.cmdline.push_back(Utf8String());
      }
      m.capabilities = Uint64();
      const uint64_t labels = Below(5);
      for (uint64_t i = 0; i < labels; ++i) {
        m.labels.push_back(Utf8String());
      }
      m.step_counter = OneIn(2);
      return m;
    }
    case 2: {
      CaptureStarted m{Utf8String(), Int64(), Uint64()};
      m.late_start = OneIn(2);
      return m;
    }
    case 3: {
      CaptureResult m{Utf8String(), Int32(),  Utf8String(), Int32(), Uint64(),
                      Uint64(),     Uint64(), Int64(),      Int64()};
      m.host_only = OneIn(2);
      m.cupti_dropped_records = Uint64();
      m.late_start = OneIn(2);
      m.first_step = Uint64();
      m.steps = Uint32();
      return m;
    }
    case 4:
      return PayloadChunk{Utf8String(), Uint64(), Binary()};
    case 5:
      return Goodbye{Utf8String()};
    default:
      return std::monostate{};
  }
}

DaemonMessage RandomMessages::Daemon(int alternative) {
  const uint64_t index = alternative < 0 ? Below(5) : static_cast<uint64_t>(alternative);
  switch (index) {
    case 1:
      return HelloAck{Uint32(), Uint32(), Utf8String(), Uint64()};
    case 2: {
      StartCapture m{Utf8String(), Int64(), Int64(), Uint64()};
      const uint64_t activities = Below(5);
      for (uint64_t i = 0; i < activities; ++i) {
        m.activities.push_back(Utf8String());
      }
      m.activity_buffer_bytes = Uint64();
      m.max_start_skew_ns = Int64();
      m.start_step = Uint64();
      m.iterations = Uint32();
      return m;
    }
    case 3:
      return CancelCapture{Utf8String(), Utf8String()};
    case 4:
      return HelloRejected{Int32(), Utf8String(), Uint32(), Uint32()};
    default:
      return std::monostate{};
  }
}

}  // namespace gpuctl::wire::testing
