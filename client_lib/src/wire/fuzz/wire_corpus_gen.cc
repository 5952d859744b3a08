// Writes the seed corpus for wire_decode_fuzz (test/fuzz_corpus/wire/):
// valid encodings of every IPC message type, including edge values, plus a
// few valid inputs protobuf's serializer never produces (unknown fields,
// out-of-order and repeated fields). Files are named client_* or daemon_*
// after the message they hold; wire_compat_test checks each against
// libprotobuf.
//
//   wire_corpus_gen OUTPUT_DIR
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "client_lib/src/wire/ipc_messages.h"
#include "client_lib/src/wire/wire_format.h"

namespace gpuctl::wire {
namespace {

template <typename Message>
std::string Encoded(const Message& message) {
  std::string out;
  Encode(message, &out);
  return out;
}

// Wraps raw member bytes as oneof member `field_number`.
std::string Member(uint32_t field_number, const std::string& body) {
  std::string out;
  StringSink sink(&out);
  PutLengthDelimitedAlways(sink, field_number, body);
  return out;
}

// The member bytes inside a one-member encoding.
std::string Body(const std::string& encoded) {
  WireReader reader(encoded);
  WireField field;
  if (!reader.ReadField(&field)) {
    return {};
  }
  return std::string(field.bytes);
}

std::string UnknownFieldsOfEveryType() {
  std::string out;
  StringSink sink(&out);
  sink.PutVarint(MakeTag(90, WireType::kVarint));
  sink.PutVarint(std::numeric_limits<uint64_t>::max());
  sink.PutVarint(MakeTag(91, WireType::kFixed64));
  sink.PutBytes(std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  sink.PutVarint(MakeTag(92, WireType::kFixed32));
  sink.PutBytes("\xff\xfe\xfd\xfc");
  PutLengthDelimitedAlways(sink, kMaxFieldNumber, "unknown");
  return out;
}

struct Writer {
  std::string dir;
  int failures = 0;
  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      ++failures;
    }
  }
};

void WriteClientSeeds(Writer& w) {
  w.Write("client_empty", Encoded(ClientMessage()));
  w.Write("client_hello_defaults", Encoded(ClientMessage(Hello{})));
  const Hello hello{.protocol_major = kProtocolMajor,
                    .protocol_minor = kProtocolMinor,
                    .library_version = "0.1.0",
                    .pid = 4242,
                    .ppid = 1,
                    .job_id = "slurm-917",
                    .rank = 3,
                    .local_rank = 1,
                    .world_size = 16,
                    .hostname = "gpu-node-07",
                    .cmdline = {"python", "-m", "torch.distributed.run", "train.py", ""},
                    .capabilities = kCapabilityMemfd | kCapabilityHostRanges | kCapabilityCupti |
                                    kCapabilityStepCounter | kCapabilityStepWindows,
                    .labels = {"team=infra", "k8s.pod=trainer-0", "k8s.namespace=ml"},
                    .step_counter = true};
  w.Write("client_hello", Encoded(ClientMessage(hello)));
  w.Write("client_hello_unknown_rank",
          Encoded(ClientMessage(Hello{.protocol_major = 1,
                                      .pid = std::numeric_limits<int32_t>::max(),
                                      .rank = -1,
                                      .local_rank = -1,
                                      .world_size = std::numeric_limits<int32_t>::min(),
                                      .hostname = "h\xc3\xb4te-\xe4\xb8\xad\xf0\x9f\x9a\x80",
                                      .capabilities = std::numeric_limits<uint64_t>::max()})));
  w.Write("client_capture_started",
          Encoded(ClientMessage(CaptureStarted{.trace_id = "tr-0001",
                                               .opened_at_unix_ns = 1'700'000'000'123'456'789})));
  w.Write("client_capture_started_step",
          Encoded(ClientMessage(CaptureStarted{.trace_id = "tr-0004",
                                               .opened_at_unix_ns = 1'700'000'000'123'456'789,
                                               .first_step = 1500,
                                               .late_start = true})));
  w.Write("client_capture_result_memfd",
          Encoded(ClientMessage(
              CaptureResult{.trace_id = "tr-0001",
                            .status = static_cast<int32_t>(CaptureStatus::kOk),
                            .transport = static_cast<int32_t>(PayloadTransport::kMemfd),
                            .payload_size = 48 << 20,
                            .event_count = 1'234'567,
                            .dropped_events = 12,
                            .window_start_unix_ns = 1'700'000'000'000'000'000,
                            .window_end_unix_ns = 1'700'000'005'000'000'000})));
  w.Write("client_capture_result_steps",
          Encoded(ClientMessage(
              CaptureResult{.trace_id = "tr-0004",
                            .status = static_cast<int32_t>(CaptureStatus::kOk),
                            .message = "captured steps 1500-1501 of 1500-1502 before the bound",
                            .transport = static_cast<int32_t>(PayloadTransport::kMemfd),
                            .payload_size = 4096,
                            .window_start_unix_ns = 1'700'000'000'000'000'000,
                            .window_end_unix_ns = 1'700'000'001'000'000'000,
                            .late_start = true,
                            .first_step = 1500,
                            .steps = 2})));
  w.Write("client_capture_result_failed",
          Encoded(ClientMessage(
              CaptureResult{.trace_id = "tr-0002",
                            .status = static_cast<int32_t>(CaptureStatus::kUnavailable),
                            .message = "libcupti.so not found (searched /usr/local/cuda)"})));
  w.Write("client_capture_result_odd_enums",
          Encoded(ClientMessage(CaptureResult{
              .trace_id = "t", .status = 99, .transport = -7, .window_start_unix_ns = -1})));
  w.Write("client_payload_chunk",
          Encoded(ClientMessage(
              PayloadChunk{.trace_id = "tr-0003",
                           .offset = 65000,
                           .data = std::string("GPUC\x00\x01\xff\x80\x00\x00rec", 13)})));
  w.Write("client_payload_chunk_empty",
          Encoded(ClientMessage(PayloadChunk{.trace_id = "tr-0003", .offset = 0})));
  w.Write("client_goodbye", Encoded(ClientMessage(Goodbye{.reason = "gpuctl_shutdown"})));
  w.Write("client_goodbye_defaults", Encoded(ClientMessage(Goodbye{})));

  // Valid inputs protobuf's serializer does not produce.
  w.Write("client_hello_unknown_fields",
          UnknownFieldsOfEveryType() +
              Member(1, Body(Encoded(ClientMessage(hello))) + UnknownFieldsOfEveryType()) +
              Member(15, "future member"));
  w.Write("client_hello_merged", Encoded(ClientMessage(Hello{.pid = 1, .cmdline = {"a"}})) +
                                     Encoded(ClientMessage(Hello{.rank = 2, .cmdline = {"b"}})));
  w.Write("client_member_replaced",
          Encoded(ClientMessage(Goodbye{.reason = "first"})) +
              Encoded(ClientMessage(CaptureStarted{.trace_id = "second"})));
  // goodbye { reason: "b" reason: "a" }, fields out of order inside hello.
  w.Write("client_goodbye_repeated_scalar", Member(5, std::string("\x0a\x01"
                                                                  "b\x0a\x01"
                                                                  "a",
                                                                  6)));
  w.Write("client_hello_out_of_order", Member(1, std::string("\x50\x01\x3a\x01x\x08\x01", 7)));
}

void WriteDaemonSeeds(Writer& w) {
  w.Write("daemon_empty", Encoded(DaemonMessage()));
  w.Write("daemon_hello_ack",
          Encoded(DaemonMessage(HelloAck{.protocol_major = kProtocolMajor,
                                         .protocol_minor = kProtocolMinor,
                                         .daemon_version = "0.1.0",
                                         .max_payload_bytes = uint64_t{1} << 30})));
  w.Write("daemon_hello_ack_defaults", Encoded(DaemonMessage(HelloAck{})));
  w.Write("daemon_start_capture",
          Encoded(DaemonMessage(StartCapture{.trace_id = "tr-0001",
                                             .start_time_unix_ns = 1'700'000'000'000'000'000,
                                             .duration_ns = 5'000'000'000,
                                             .max_buffer_bytes = 128 << 20})));
  w.Write("daemon_start_capture_iterations",
          Encoded(DaemonMessage(StartCapture{.trace_id = "tr-0004",
                                             .start_time_unix_ns = 1'700'000'000'000'000'000,
                                             .duration_ns = 600'000'000'000,
                                             .max_start_skew_ns = 50'000'000,
                                             .start_step = 1500,
                                             .iterations = 3})));
  w.Write(
      "daemon_start_capture_extremes",
      Encoded(DaemonMessage(StartCapture{.trace_id = "\xe2\x9c\x93",
                                         .start_time_unix_ns = std::numeric_limits<int64_t>::min(),
                                         .duration_ns = -1,
                                         .max_buffer_bytes = std::numeric_limits<uint64_t>::max(),
                                         .max_start_skew_ns = std::numeric_limits<int64_t>::min(),
                                         .start_step = std::numeric_limits<uint64_t>::max(),
                                         .iterations = std::numeric_limits<uint32_t>::max()})));
  w.Write("daemon_cancel_capture",
          Encoded(DaemonMessage(CancelCapture{.trace_id = "tr-0001", .reason = "user cancelled"})));
  w.Write("daemon_cancel_unknown_fields",
          Member(3, UnknownFieldsOfEveryType() + std::string("\x12\x01r\x0a\x01t", 6)) +
              UnknownFieldsOfEveryType());
}

}  // namespace
}  // namespace gpuctl::wire

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  gpuctl::wire::Writer writer{argv[1]};
  gpuctl::wire::WriteClientSeeds(writer);
  gpuctl::wire::WriteDaemonSeeds(writer);
  return writer.failures == 0 ? 0 : 1;
}
