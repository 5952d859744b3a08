// Differential tests of the wire codec against libprotobuf on ipc.proto:
// byte-identical encoding, identical decoding of protobuf's output, and the
// same verdict and result on unknown, reordered, duplicated, truncated and
// mutated input.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "client_lib/src/wire/ipc_messages.h"
#include "client_lib/src/wire/wire_compat_support.h"
#include "client_lib/src/wire/wire_format.h"
#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace gpuctl::wire::testing {
namespace {

using ::google::protobuf::Message;
using ::google::protobuf::UnknownField;
using ::google::protobuf::UnknownFieldSet;
using ::google::protobuf::util::MessageDifferencer;

constexpr int kSeeds = 2000;

template <typename T>
struct Schema;
template <>
struct Schema<ClientMessage> {
  using Proto = pb::ClientMessage;
  static constexpr int kAlternatives = static_cast<int>(std::variant_size_v<ClientMessage>);
  static ClientMessage Random(RandomMessages& r, int alternative) { return r.Client(alternative); }
};
template <>
struct Schema<DaemonMessage> {
  using Proto = pb::DaemonMessage;
  static constexpr int kAlternatives = static_cast<int>(std::variant_size_v<DaemonMessage>);
  static DaemonMessage Random(RandomMessages& r, int alternative) { return r.Daemon(alternative); }
};

template <typename T>
std::string WireEncode(const T& message) {
  std::string out;
  Encode(message, &out);
  return out;
}

template <typename Proto>
bool ProtoParse(std::string_view bytes, Proto* out) {
  return out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// The oneof member that is set, or null.
const Message* SetMember(const Message& message) {
  const auto* oneof = message.GetDescriptor()->FindOneofByName("msg");
  const auto* field = message.GetReflection()->GetOneofFieldDescriptor(message, oneof);
  return field == nullptr ? nullptr : &message.GetReflection()->GetMessage(message, field);
}
Message* MutableSetMember(Message* message) {
  const auto* oneof = message->GetDescriptor()->FindOneofByName("msg");
  const auto* field = message->GetReflection()->GetOneofFieldDescriptor(*message, oneof);
  return field == nullptr ? nullptr : message->GetReflection()->MutableMessage(message, field);
}

bool HasGroup(const UnknownFieldSet& fields) {
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).type() == UnknownField::TYPE_GROUP) {
      return true;
    }
  }
  return false;
}

// Whether protobuf kept an unknown group anywhere: the one input shape
// protobuf skips and this codec refuses by design.
bool HasGroup(const Message& message) {
  if (HasGroup(message.GetReflection()->GetUnknownFields(message))) {
    return true;
  }
  const Message* member = SetMember(message);
  return member != nullptr && HasGroup(member->GetReflection()->GetUnknownFields(*member));
}

// Parses with both and checks they agree. Returns whether both accepted.
template <typename T>
bool ExpectSameVerdict(std::string_view bytes, bool allow_protobuf_only_with_groups) {
  typename Schema<T>::Proto proto;
  T decoded;
  const bool proto_ok = ProtoParse(bytes, &proto);
  const bool wire_ok = Decode(bytes, &decoded);
  if (wire_ok) {
    EXPECT_TRUE(proto_ok) << ::testing::PrintToString(std::string(bytes));
    if (proto_ok) {
      EXPECT_TRUE(decoded == FromProto(proto)) << proto.DebugString();
    }
  } else {
    EXPECT_TRUE(std::holds_alternative<std::monostate>(decoded));
    if (proto_ok) {
      EXPECT_TRUE(allow_protobuf_only_with_groups && HasGroup(proto))
          << "protobuf accepted what the codec refused: "
          << ::testing::PrintToString(std::string(bytes)) << "\n"
          << proto.DebugString();
    }
  }
  return wire_ok && proto_ok;
}

template <typename T>
class WireCompatTest : public ::testing::Test {};
using MessageTypes = ::testing::Types<ClientMessage, DaemonMessage>;
TYPED_TEST_SUITE(WireCompatTest, MessageTypes);

TYPED_TEST(WireCompatTest, EncodingIsByteIdenticalToProtobuf) {
  using S = Schema<TypeParam>;
  for (int seed = 0; seed < kSeeds; ++seed) {
    RandomMessages random(seed);
    for (int alternative = 0; alternative < S::kAlternatives; ++alternative) {
      const TypeParam message = S::Random(random, alternative);
      const std::string bytes = WireEncode(message);
      const typename S::Proto expected = ToProto(message);
      ASSERT_EQ(bytes, expected.SerializeAsString()) << "seed " << seed << "\n"
                                                     << expected.DebugString();
      typename S::Proto parsed;
      ASSERT_TRUE(ProtoParse(bytes, &parsed)) << "seed " << seed;
      ASSERT_TRUE(MessageDifferencer::Equals(parsed, expected)) << "seed " << seed;
    }
  }
}

TYPED_TEST(WireCompatTest, DecodesWhatProtobufSerializes) {
  using S = Schema<TypeParam>;
  for (int seed = 0; seed < kSeeds; ++seed) {
    RandomMessages random(seed + 1'000'000);
    for (int alternative = 0; alternative < S::kAlternatives; ++alternative) {
      const TypeParam message = S::Random(random, alternative);
      std::string bytes;
      ASSERT_TRUE(ToProto(message).SerializeToString(&bytes));
      TypeParam decoded;
      ASSERT_TRUE(Decode(bytes, &decoded)) << "seed " << seed;
      ASSERT_TRUE(decoded == message) << "seed " << seed;
      // Decode replaces previous content rather than merging into it.
      ASSERT_TRUE(Decode(bytes, &decoded));
      ASSERT_TRUE(decoded == message) << "seed " << seed;
    }
  }
}

// Adds, to `message`, unknown fields of every wire type and known field
// numbers with the wrong wire type; protobuf keeps both as unknown fields.
void AddUnknownFields(Message* message, RandomMessages& random) {
  UnknownFieldSet* unknown = message->GetReflection()->MutableUnknownFields(message);
  unknown->AddVarint(100, random.Uint64());
  unknown->AddFixed32(101, random.Uint32());
  unknown->AddFixed64(102, random.Uint64());
  unknown->AddLengthDelimited(103, random.Binary());
  unknown->AddVarint(kMaxFieldNumber, random.Uint64());
  unknown->AddLengthDelimited(16, random.Binary());
  const auto* descriptor = message->GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    const bool length_delimited = field->type() == field->TYPE_STRING ||
                                  field->type() == field->TYPE_BYTES ||
                                  field->type() == field->TYPE_MESSAGE;
    if (length_delimited) {
      unknown->AddVarint(field->number(), random.Uint64());
      unknown->AddFixed32(field->number(), random.Uint32());
    } else {
      unknown->AddLengthDelimited(field->number(), random.Binary());
      unknown->AddFixed64(field->number(), random.Uint64());
    }
  }
}

TYPED_TEST(WireCompatTest, SkipsUnknownFieldsAndMismatchedWireTypes) {
  using S = Schema<TypeParam>;
  for (int seed = 0; seed < kSeeds / 4; ++seed) {
    RandomMessages random(seed + 2'000'000);
    for (int alternative = 0; alternative < S::kAlternatives; ++alternative) {
      const TypeParam message = S::Random(random, alternative);
      typename S::Proto proto = ToProto(message);
      AddUnknownFields(&proto, random);
      if (Message* member = MutableSetMember(&proto)) {
        AddUnknownFields(member, random);
      }
      const std::string bytes = proto.SerializeAsString();
      TypeParam decoded;
      ASSERT_TRUE(Decode(bytes, &decoded)) << "seed " << seed;
      ASSERT_TRUE(decoded == message) << "seed " << seed;
      ASSERT_TRUE(ExpectSameVerdict<TypeParam>(bytes, false));
    }
  }
}

// Serializes each set field of `message` on its own, so the pieces can be
// concatenated in any order (a repeated field stays one piece: the order of
// its elements is meaningful).
std::vector<std::string> FieldPieces(const Message& message) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  std::vector<std::string> pieces;
  for (const auto* keep : fields) {
    std::unique_ptr<Message> only(message.New());
    only->CopyFrom(message);
    for (const auto* other : fields) {
      if (other != keep) {
        only->GetReflection()->ClearField(only.get(), other);
      }
    }
    pieces.push_back(only->SerializeAsString());
  }
  return pieces;
}

TYPED_TEST(WireCompatTest, AcceptsFieldsInAnyOrder) {
  using S = Schema<TypeParam>;
  for (int seed = 0; seed < kSeeds / 2; ++seed) {
    RandomMessages random(seed + 3'000'000);
    const int alternative = 1 + static_cast<int>(random.Below(S::kAlternatives - 1));
    const TypeParam message = S::Random(random, alternative);
    const typename S::Proto proto = ToProto(message);
    std::vector<std::string> pieces = FieldPieces(*SetMember(proto));
    UnknownFieldSet unknown;
    unknown.AddFixed64(77, random.Uint64());
    std::string unknown_bytes;
    ASSERT_TRUE(unknown.SerializeToString(&unknown_bytes));
    pieces.push_back(unknown_bytes);
    std::shuffle(pieces.begin(), pieces.end(), random.rng());
    std::string inner;
    for (const std::string& piece : pieces) {
      inner += piece;
    }
    std::string bytes;
    StringSink sink(&bytes);
    PutLengthDelimitedAlways(sink, static_cast<uint32_t>(alternative), inner);
    TypeParam decoded;
    ASSERT_TRUE(Decode(bytes, &decoded)) << "seed " << seed;
    ASSERT_TRUE(decoded == message) << "seed " << seed;
    ASSERT_TRUE(ExpectSameVerdict<TypeParam>(bytes, false));
  }
}

TYPED_TEST(WireCompatTest, RepeatedEmbeddedMessagesMergeAndOtherMembersReplace) {
  using S = Schema<TypeParam>;
  for (int seed = 0; seed < kSeeds; ++seed) {
    RandomMessages random(seed + 4'000'000);
    const TypeParam first = S::Random(random, -1);
    const TypeParam second =
        S::Random(random, random.Below(2) ? static_cast<int>(first.index()) : -1);
    const std::string bytes = WireEncode(first) + WireEncode(second);
    ASSERT_TRUE(ExpectSameVerdict<TypeParam>(bytes, false)) << "seed " << seed;
    if (first.index() != second.index() && second.index() != 0) {
      TypeParam decoded;
      ASSERT_TRUE(Decode(bytes, &decoded));
      ASSERT_TRUE(decoded == second);
    }
  }
}

TEST(WireCompatMergeTest, MergeKeepsEarlierFieldsAppendsRepeatedAndLastScalarWins) {
  Hello first;
  first.hostname = "node-1";
  first.pid = 10;
  first.rank = 3;
  first.cmdline = {"python", "train.py"};
  Hello second;
  second.pid = -20;
  second.cmdline = {"--lr=1"};
  std::string bytes = WireEncode(ClientMessage(first)) + WireEncode(ClientMessage(second));
  // A scalar repeated inside one embedded message: the last one wins.
  bytes += std::string("\x0a\x04\x38\x05\x38\x07", 6);  // hello { rank: 5 rank: 7 }
  ClientMessage decoded;
  ASSERT_TRUE(Decode(bytes, &decoded));
  const Hello* hello = std::get_if<Hello>(&decoded);
  ASSERT_NE(hello, nullptr);
  EXPECT_EQ(hello->hostname, "node-1");
  EXPECT_EQ(hello->pid, -20);
  EXPECT_EQ(hello->rank, 7);
  EXPECT_EQ(hello->cmdline, (std::vector<std::string>{"python", "train.py", "--lr=1"}));
  EXPECT_TRUE(ExpectSameVerdict<ClientMessage>(bytes, false));
}

// The fields of protocol minor 1, checked by name on protobuf's side so a
// wrong field number cannot hide behind a symmetric mistake in the codec.
TEST(WireCompatMinor1Test, NewFieldsLandInProtobufsFieldsByName) {
  Hello hello;
  hello.labels = {"team=a", "k8s.pod=trainer-0"};
  hello.step_counter = true;
  hello.capabilities = kCapabilityStepCounter | kCapabilityStepWindows;
  pb::ClientMessage client;
  ASSERT_TRUE(ProtoParse(WireEncode(ClientMessage(hello)), &client));
  ASSERT_EQ(client.hello().labels_size(), 2);
  EXPECT_EQ(client.hello().labels(1), "k8s.pod=trainer-0");
  EXPECT_TRUE(client.hello().step_counter());
  EXPECT_EQ(client.hello().capabilities(),
            static_cast<uint64_t>(pb::CAPABILITY_STEP_COUNTER | pb::CAPABILITY_STEP_WINDOWS));

  const CaptureStarted started{
      .trace_id = "t", .opened_at_unix_ns = 5, .first_step = 1500, .late_start = true};
  ASSERT_TRUE(ProtoParse(WireEncode(ClientMessage(started)), &client));
  EXPECT_EQ(client.capture_started().first_step(), 1500u);
  EXPECT_TRUE(client.capture_started().late_start());

  CaptureResult result;
  result.trace_id = "t";
  result.late_start = true;
  result.first_step = std::numeric_limits<uint64_t>::max();
  result.steps = 3;
  ASSERT_TRUE(ProtoParse(WireEncode(ClientMessage(result)), &client));
  EXPECT_TRUE(client.capture_result().late_start());
  EXPECT_EQ(client.capture_result().first_step(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(client.capture_result().steps(), 3u);

  pb::DaemonMessage daemon;
  pb::StartCapture* start = daemon.mutable_start_capture();
  start->set_trace_id("t");
  start->set_max_start_skew_ns(-7);
  start->set_start_step(uint64_t{1} << 40);
  start->set_iterations(std::numeric_limits<uint32_t>::max());
  DaemonMessage decoded;
  ASSERT_TRUE(Decode(daemon.SerializeAsString(), &decoded));
  const StartCapture* got = std::get_if<StartCapture>(&decoded);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->max_start_skew_ns, -7);
  EXPECT_EQ(got->start_step, uint64_t{1} << 40);
  EXPECT_EQ(got->iterations, std::numeric_limits<uint32_t>::max());
  EXPECT_GE(kProtocolMinor, 1u);
}

// Labels are a repeated string: they append across merged Hellos, as in protobuf.
TEST(WireCompatMinor1Test, LabelsAppendAcrossMergedHellos) {
  const std::string bytes = WireEncode(ClientMessage(Hello{.labels = {"a=1"}})) +
                            WireEncode(ClientMessage(Hello{.labels = {"b=2"}}));
  ClientMessage decoded;
  ASSERT_TRUE(Decode(bytes, &decoded));
  EXPECT_EQ(std::get<Hello>(decoded).labels, (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_TRUE(ExpectSameVerdict<ClientMessage>(bytes, false));
}

TYPED_TEST(WireCompatTest, TruncationAtEveryByteAgreesWithProtobuf) {
  using S = Schema<TypeParam>;
  for (int seed = 0; seed < kSeeds / 8; ++seed) {
    RandomMessages random(seed + 5'000'000);
    for (int alternative = 0; alternative < S::kAlternatives; ++alternative) {
      const std::string bytes = WireEncode(S::Random(random, alternative));
      for (size_t cut = 0; cut <= bytes.size(); ++cut) {
        ExpectSameVerdict<TypeParam>(std::string_view{bytes}.substr(0, cut), false);
        if (::testing::Test::HasFailure()) {
          FAIL() << "seed " << seed << " cut " << cut;
        }
      }
    }
  }
}

// Small random edits of valid encodings, biased toward wire-format
// structure (tag bytes, varint continuation bits, lengths).
std::string Mutate(std::string bytes, RandomMessages& random) {
  const uint64_t edits = 1 + random.Below(4);
  for (uint64_t e = 0; e < edits; ++e) {
    const size_t pos = bytes.empty() ? 0 : random.Below(bytes.size());
    switch (random.Below(7)) {
      case 0:
        if (!bytes.empty()) {
          bytes[pos] = static_cast<char>(bytes[pos] ^ (1 << random.Below(8)));
        }
        break;
      case 1:
        if (!bytes.empty()) {
          bytes[pos] = static_cast<char>(random.Below(256));
        }
        break;
      case 2:
        bytes.insert(pos, 1, static_cast<char>(random.Below(256)));
        break;
      case 3:
        if (!bytes.empty()) {
          bytes.erase(pos, 1 + random.Below(3));
        }
        break;
      case 4: {  // a tag with a random small field number and any wire type
        bytes.insert(pos, 1, static_cast<char>(8 * (1 + random.Below(15)) + random.Below(8)));
        break;
      }
      case 5:
        if (!bytes.empty()) {
          bytes[pos] = static_cast<char>(bytes[pos] ^ 0x80);
        }
        break;
      default:
        bytes.resize(random.Below(bytes.size() + 1));
        break;
    }
  }
  return bytes;
}

TYPED_TEST(WireCompatTest, MutatedInputsAgreeWithProtobuf) {
  using S = Schema<TypeParam>;
  int accepted = 0;
  for (int seed = 0; seed < kSeeds * 4; ++seed) {
    RandomMessages random(seed + 6'000'000);
    const std::string bytes = Mutate(WireEncode(S::Random(random, -1)), random);
    accepted += ExpectSameVerdict<TypeParam>(bytes, true);
    if (::testing::Test::HasFailure()) {
      FAIL() << "seed " << seed;
    }
  }
  // Both verdicts must have been exercised for the comparison to mean much.
  EXPECT_GT(accepted, kSeeds / 2);
  EXPECT_LT(accepted, kSeeds * 4 - kSeeds / 2);
}

TEST(WireCompatGroupTest, UnknownGroupsAreRefusedWhereProtobufSkipsThem) {
  // Goodbye { reason: "x" } followed by group 9 { varint 1: 1 } at top level.
  const std::string bytes("\x2a\x03\x0a\x01x\x4b\x08\x01\x4c", 9);
  pb::ClientMessage proto;
  ASSERT_TRUE(ProtoParse(bytes, &proto));
  EXPECT_TRUE(HasGroup(proto));
  ClientMessage decoded;
  EXPECT_FALSE(Decode(bytes, &decoded));
}

template <typename T>
void ExpectBothReject(const T& message) {
  const std::string bytes = WireEncode(message);
  typename Schema<T>::Proto proto;
  EXPECT_FALSE(ProtoParse(bytes, &proto)) << ::testing::PrintToString(bytes);
  T decoded;
  EXPECT_FALSE(Decode(bytes, &decoded)) << ::testing::PrintToString(bytes);
}

TEST(WireCompatUtf8Test, InvalidUtf8InStringFieldsIsRefusedLikeProtobuf) {
  const std::string bad = "ok\xc0\xafno";
  ExpectBothReject(ClientMessage(Hello{.library_version = bad}));
  ExpectBothReject(ClientMessage(Hello{.job_id = bad}));
  ExpectBothReject(ClientMessage(Hello{.hostname = bad}));
  ExpectBothReject(ClientMessage(Hello{.cmdline = {"python", bad}}));
  ExpectBothReject(ClientMessage(Hello{.labels = {"k=v", bad}}));
  ExpectBothReject(ClientMessage(CaptureStarted{.trace_id = bad}));
  ExpectBothReject(ClientMessage(CaptureResult{.trace_id = "t", .message = bad}));
  ExpectBothReject(ClientMessage(PayloadChunk{.trace_id = bad}));
  ExpectBothReject(ClientMessage(Goodbye{.reason = "\xed\xa0\x80"}));
  ExpectBothReject(DaemonMessage(HelloAck{.daemon_version = bad}));
  ExpectBothReject(DaemonMessage(StartCapture{.trace_id = "\xff"}));
  ExpectBothReject(DaemonMessage(CancelCapture{.reason = bad}));
  ExpectBothReject(DaemonMessage(HelloRejected{.message = bad}));
  // `bytes` fields carry anything.
  const ClientMessage chunk = PayloadChunk{.trace_id = "t", .offset = 4, .data = bad};
  EXPECT_TRUE(ExpectSameVerdict<ClientMessage>(WireEncode(chunk), false));
}

TEST(WireCompatUtf8Test, ValidatorMatchesProtobufOnAllShortSequences) {
  const auto expect_same = [](const std::string& s) {
    const bool ours = IsValidUtf8(s);
    const bool theirs =
        google::protobuf::internal::IsStructurallyValidUTF8(s.data(), static_cast<int>(s.size()));
    if (ours != theirs) {
      ADD_FAILURE() << ::testing::PrintToString(s);
    }
    return ours == theirs;
  };
  std::string s;
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      s.assign({static_cast<char>(a), static_cast<char>(b)});
      ASSERT_TRUE(expect_same(s.substr(0, 1)) && expect_same(s));
      if (a < 0xc0) {
        continue;  // three-byte sequences need a lead byte
      }
      for (int c = 0; c < 256; ++c) {
        s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
        ASSERT_TRUE(expect_same(s));
      }
    }
  }
  const int edges[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xf4, 0xff};
  for (int lead = 0xe0; lead < 0x100; ++lead) {
    for (int b : edges) {
      for (int c : edges) {
        for (int d : edges) {
          s.assign({static_cast<char>(lead), static_cast<char>(b), static_cast<char>(c),
                    static_cast<char>(d)});
          ASSERT_TRUE(expect_same(s));
        }
      }
    }
  }
  RandomMessages random(7);
  for (int i = 0; i < 200000; ++i) {
    s.clear();
    const uint64_t length = random.Below(12);
    for (uint64_t j = 0; j < length; ++j) {
      s.push_back(
          static_cast<char>(random.Below(3) == 0 ? random.Below(0x80) : 0x80 + random.Below(0x80)));
    }
    ASSERT_TRUE(expect_same(s));
  }
}

TEST(WireCompatCorpusTest, SeedCorpusDecodesLikeProtobuf) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(GPUCTL_WIRE_CORPUS_DIR)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    if (name.starts_with("client_")) {
      EXPECT_TRUE(ExpectSameVerdict<ClientMessage>(bytes, false));
    } else if (name.starts_with("daemon_")) {
      EXPECT_TRUE(ExpectSameVerdict<DaemonMessage>(bytes, false));
    } else {
      continue;
    }
    ++files;
  }
  EXPECT_GE(files, 20);
}

}  // namespace
}  // namespace gpuctl::wire::testing
