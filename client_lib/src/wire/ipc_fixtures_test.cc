// The IPC fixtures under test/fixtures/ipc/ (see its README): what a
// library of an older minor (1.0), of a hypothetical newer minor (1.3, with
// fields and a message this daemon does not know) and of another major
// (2.0) send. This test holds their inputs and fails when the library's
// encoder no longer writes the committed bytes for them; the daemon's
// replay test (daemon/ipc/ipc_version_skew_test.cc) sends those bytes.
//
// Regenerate after an intended change of the encoder:
//   GPUCTL_REGENERATE_IPC_FIXTURES=1 ctest -R ipc_fixtures_test
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "client_lib/src/wire/ipc_messages.h"
#include "gtest/gtest.h"

namespace gpuctl::wire {
namespace {

// Replay tests ask the daemon for a trace with this id.
constexpr char kFixtureTraceId[] = "0190d3a4-5b6c-7d8e-9f00-00000000c0de";

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string UnknownVarint(uint32_t field, uint64_t value) {
  return Varint(uint64_t{field} << 3) + Varint(value);
}

std::string UnknownString(uint32_t field, const std::string& value) {
  return Varint((uint64_t{field} << 3) | 2) + Varint(value.size()) + value;
}

std::string Encoded(const ClientMessage& message) {
  std::string out;
  Encode(message, &out);
  return out;
}

// `encoded` is one ClientMessage holding one member; `extra` (fields a newer
// schema has) is appended inside that member.
std::string WithExtraFields(const std::string& encoded, const std::string& extra) {
  size_t pos = 1;  // member tags are one byte (field numbers below 16)
  uint64_t length = 0;
  for (int shift = 0; pos < encoded.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(encoded[pos++]);
    length |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) break;
  }
  const std::string body = encoded.substr(pos, length);
  return encoded.substr(0, 1) + Varint(body.size() + extra.size()) + body + extra;
}

Hello Minor0Hello() {
  return Hello{.protocol_major = 1,
               .protocol_minor = 0,
               .library_version = "0.1.0",
               .pid = 4242,
               .ppid = 4200,
               .job_id = "skew",
               .rank = 0,
               .local_rank = 0,
               .world_size = 1,
               .hostname = "node-a",
               .cmdline = {"python", "train.py", "--steps=5"},
               .capabilities = kCapabilityMemfd | kCapabilityHostRanges};
}

CaptureResult FixtureResult() {
  return CaptureResult{.trace_id = kFixtureTraceId,
                       .status = static_cast<int32_t>(CaptureStatus::kOk),
                       .transport = static_cast<int32_t>(PayloadTransport::kInline),
                       .payload_size = 1,
                       .event_count = 1};
}

// File name -> bytes.
std::map<std::string, std::string> Fixtures() {
  std::map<std::string, std::string> out;
  out["minor0_hello.bin"] = Encoded(Minor0Hello());
  out["minor0_capture_started.bin"] =
      Encoded(CaptureStarted{.trace_id = kFixtureTraceId, .opened_at_unix_ns = 1});
  out["minor0_capture_result.bin"] = Encoded(FixtureResult());
  out["minor0_goodbye.bin"] = Encoded(Goodbye{.reason = "process exit"});

  Hello next = Minor0Hello();
  next.protocol_minor = 3;
  next.library_version = "1.3.0";
  next.labels = {"team=ml"};
  next.capabilities |= kCapabilityStepWindows;
  out["minor3_hello.bin"] =
      WithExtraFields(Encoded(next), UnknownString(15, "gpu=GPU-8f2c") + UnknownVarint(16, 7));
  out["minor3_capture_started.bin"] =
      WithExtraFields(Encoded(CaptureStarted{.trace_id = kFixtureTraceId, .opened_at_unix_ns = 1}),
                      UnknownVarint(5, 9));
  CaptureResult result = FixtureResult();
  result.first_step = 0;
  out["minor3_capture_result.bin"] =
      WithExtraFields(Encoded(result), UnknownString(15, "compressed=none"));
  // A message kind 1.3 adds (ClientMessage field 6).
  out["minor3_unknown_message.bin"] = UnknownString(6, UnknownVarint(1, 1));
  out["minor3_goodbye.bin"] = Encoded(Goodbye{.reason = "process exit"});

  Hello major2 = Minor0Hello();
  major2.protocol_major = 2;
  major2.protocol_minor = 0;
  out["major2_hello.bin"] = Encoded(major2);
  return out;
}

std::string Hex(const std::string& bytes) {
  std::ostringstream s;
  for (unsigned char c : bytes) s << "0123456789abcdef"[c >> 4] << "0123456789abcdef"[c & 15];
  return s.str();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(IpcFixturesTest, TheEncoderStillWritesTheCommittedBytes) {
  const bool regenerate = std::getenv("GPUCTL_REGENERATE_IPC_FIXTURES") != nullptr;
  for (const auto& [name, bytes] : Fixtures()) {
    const std::string path = std::string(GPUCTL_IPC_FIXTURE_DIR) + "/" + name;
    if (regenerate) {
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    }
    EXPECT_EQ(Hex(ReadFile(path)), Hex(bytes))
        << path << " differs from what the encoder writes for its input. If the change is "
        << "intended and keeps the protocol compatible, regenerate with "
        << "GPUCTL_REGENERATE_IPC_FIXTURES=1 (test/fixtures/ipc/README.md).";
  }
}

TEST(IpcFixturesTest, TheLibraryDecodesANewerLibrarysHelloSkippingWhatItDoesNotKnow) {
  ClientMessage decoded;
  ASSERT_TRUE(Decode(Fixtures()["minor3_hello.bin"], &decoded));
  const Hello* hello = std::get_if<Hello>(&decoded);
  ASSERT_NE(hello, nullptr);
  EXPECT_EQ(hello->protocol_minor, 3u);
  EXPECT_EQ(hello->labels, std::vector<std::string>{"team=ml"});
  EXPECT_EQ(hello->cmdline, Minor0Hello().cmdline);
  ASSERT_TRUE(Decode(Fixtures()["minor3_unknown_message.bin"], &decoded));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(decoded));
}

}  // namespace
}  // namespace gpuctl::wire
