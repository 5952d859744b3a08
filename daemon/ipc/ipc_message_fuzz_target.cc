// libFuzzer entry point for the daemon's side of the IPC codec: a datagram
// from a client, parsed as the IPC server parses it (libprotobuf). Invariants:
//  - whatever parses re-serializes to bytes that parse to an equal message,
//    and re-serializing that gives the same bytes (no state lost or invented);
//  - whatever the library's own decoder accepts, re-encoded as a library
//    would send it, the daemon parses to the same field values: the two
//    codecs agree on every message the library can produce.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <variant>

#include "client_lib/src/wire/ipc_messages.h"
#include "google/protobuf/util/message_differencer.h"
#include "gpuctl/v1/ipc.pb.h"

namespace {

using gpuctl::v1::ipc::ClientMessage;

void CheckProtobufRoundTrip(const uint8_t* data, size_t size) {
  ClientMessage first;
  if (!first.ParseFromArray(data, static_cast<int>(size))) return;
  const std::string serialized = first.SerializeAsString();
  ClientMessage second;
  if (!second.ParseFromString(serialized)) std::abort();
  if (!google::protobuf::util::MessageDifferencer::Equals(first, second)) std::abort();
  if (second.SerializeAsString() != serialized) std::abort();
}

void CheckAgreesWithLibrary(const uint8_t* data, size_t size) {
  namespace wire = gpuctl::wire;
  wire::ClientMessage decoded;
  if (!wire::Decode(std::string_view(reinterpret_cast<const char*>(data), size),  // NOLINT
                    &decoded)) {
    return;
  }
  std::string sent;
  wire::Encode(decoded, &sent);
  ClientMessage parsed;
  if (!parsed.ParseFromString(sent)) std::abort();
  if (const auto* hello = std::get_if<wire::Hello>(&decoded)) {
    const auto& h = parsed.hello();
    if (!parsed.has_hello() || h.pid() != hello->pid || h.job_id() != hello->job_id ||
        h.rank() != hello->rank || h.hostname() != hello->hostname ||
        h.capabilities() != hello->capabilities || h.step_counter() != hello->step_counter ||
        h.cmdline_size() != static_cast<int>(hello->cmdline.size()) ||
        h.labels_size() != static_cast<int>(hello->labels.size())) {
      std::abort();
    }
  } else if (const auto* started = std::get_if<wire::CaptureStarted>(&decoded)) {
    if (!parsed.has_capture_started() || parsed.capture_started().trace_id() != started->trace_id ||
        parsed.capture_started().opened_at_unix_ns() != started->opened_at_unix_ns) {
      std::abort();
    }
  } else if (const auto* result = std::get_if<wire::CaptureResult>(&decoded)) {
    if (!parsed.has_capture_result() || parsed.capture_result().trace_id() != result->trace_id ||
        parsed.capture_result().status() != result->status ||
        parsed.capture_result().transport() != result->transport ||
        parsed.capture_result().payload_size() != result->payload_size ||
        parsed.capture_result().first_step() != result->first_step) {
      std::abort();
    }
  } else if (const auto* chunk = std::get_if<wire::PayloadChunk>(&decoded)) {
    if (!parsed.has_payload_chunk() || parsed.payload_chunk().offset() != chunk->offset ||
        parsed.payload_chunk().data() != chunk->data) {
      std::abort();
    }
  } else if (const auto* goodbye = std::get_if<wire::Goodbye>(&decoded)) {
    if (!parsed.has_goodbye() || parsed.goodbye().reason() != goodbye->reason) std::abort();
  } else if (parsed.msg_case() != ClientMessage::MSG_NOT_SET) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckProtobufRoundTrip(data, size);
  CheckAgreesWithLibrary(data, size);
  return 0;
}
