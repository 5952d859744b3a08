#include "client_lib/src/wire/wire_format.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuctl::wire {
namespace {

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) {
    out.push_back(static_cast<char>(b));
  }
  return out;
}

// A reader over a temporary, for use within one full-expression.
WireReader Over(const std::string& bytes) { return WireReader(bytes); }

std::string EncodeVarint(uint64_t value) {
  std::string out;
  StringSink(&out).PutVarint(value);
  return out;
}

TEST(WireFormatTest, VarintEncodingMatchesKnownBytes) {
  EXPECT_EQ(EncodeVarint(0), Bytes({0x00}));
  EXPECT_EQ(EncodeVarint(1), Bytes({0x01}));
  EXPECT_EQ(EncodeVarint(127), Bytes({0x7f}));
  EXPECT_EQ(EncodeVarint(128), Bytes({0x80, 0x01}));
  EXPECT_EQ(EncodeVarint(300), Bytes({0xac, 0x02}));
  EXPECT_EQ(EncodeVarint(std::numeric_limits<uint64_t>::max()),
            Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  // Negative int32 is sign-extended: ten bytes, as protobuf writes it.
  EXPECT_EQ(EncodeVarint(Int32ToVarint(-1)), EncodeVarint(std::numeric_limits<uint64_t>::max()));
  EXPECT_EQ(EncodeVarint(Int32ToVarint(std::numeric_limits<int32_t>::min())).size(), 10u);
}

TEST(WireFormatTest, VarintSizeAgreesWithEncoderAndRoundTrips) {
  std::vector<uint64_t> values = {0, 1, 127, 128, 16383, 16384};
  for (int shift = 0; shift < 64; ++shift) {
    const uint64_t bit = uint64_t{1} << shift;
    values.insert(values.end(), {bit - 1, bit, bit + 1, ~bit});
  }
  for (uint64_t value : values) {
    const std::string encoded = EncodeVarint(value);
    EXPECT_EQ(VarintSize(value), encoded.size()) << value;
    WireReader reader(encoded);
    uint64_t decoded = 0;
    ASSERT_TRUE(reader.ReadVarint(&decoded)) << value;
    EXPECT_EQ(decoded, value);
    EXPECT_TRUE(reader.AtEnd());
    for (size_t cut = 0; cut < encoded.size(); ++cut) {
      WireReader truncated(std::string_view{encoded}.substr(0, cut));
      EXPECT_FALSE(truncated.ReadVarint(&decoded)) << value << " cut at " << cut;
    }
  }
}

TEST(WireFormatTest, VarintLongerThanTenBytesIsRejected) {
  const std::string eleven =
      Bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00});
  uint64_t value = 0;
  EXPECT_FALSE(Over(eleven).ReadVarint(&value));
}

TEST(WireFormatTest, TenthVarintByteKeepsOnlyItsLowestBit) {
  // protobuf drops payload bits beyond 64 rather than failing.
  const std::string ten = Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f});
  uint64_t value = 0;
  ASSERT_TRUE(Over(ten).ReadVarint(&value));
  EXPECT_EQ(value, std::numeric_limits<uint64_t>::max());
  const std::string padded_one =
      Bytes({0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00});
  ASSERT_TRUE(Over(padded_one).ReadVarint(&value));
  EXPECT_EQ(value, 1u);
}

TEST(WireFormatTest, TagSplitsFieldNumberAndWireType) {
  uint32_t field = 0;
  WireType type = WireType::kVarint;
  ASSERT_TRUE(Over(Bytes({0x08})).ReadTag(&field, &type));
  EXPECT_EQ(field, 1u);
  EXPECT_EQ(type, WireType::kVarint);
  std::string max_tag;
  StringSink(&max_tag).PutVarint(MakeTag(kMaxFieldNumber, WireType::kFixed32));
  ASSERT_EQ(max_tag.size(), 5u);
  ASSERT_TRUE(Over(max_tag).ReadTag(&field, &type));
  EXPECT_EQ(field, kMaxFieldNumber);
  EXPECT_EQ(type, WireType::kFixed32);
}

TEST(WireFormatTest, TagRejectsFieldZeroGroupsAndReservedWireTypes) {
  uint32_t field = 0;
  WireType type = WireType::kVarint;
  for (int wire_type = 0; wire_type < 8; ++wire_type) {
    EXPECT_FALSE(Over(Bytes({wire_type})).ReadTag(&field, &type)) << wire_type;
    const bool accepted = Over(Bytes({0x08 | wire_type})).ReadTag(&field, &type);
    EXPECT_EQ(accepted, wire_type == 0 || wire_type == 1 || wire_type == 2 || wire_type == 5)
        << wire_type;
  }
  // Field number 0 spelled with a redundant continuation byte.
  EXPECT_FALSE(Over(Bytes({0x80, 0x00})).ReadTag(&field, &type));
}

TEST(WireFormatTest, TagIsAtMostFiveBytesAndTruncatedTo32Bits) {
  uint32_t field = 0;
  WireType type = WireType::kVarint;
  EXPECT_FALSE(Over(Bytes({0x88, 0x80, 0x80, 0x80, 0x80, 0x00})).ReadTag(&field, &type));
  // 8 + (1 << 32): the bit past 32 drops, as in protobuf's ReadTag.
  ASSERT_TRUE(Over(Bytes({0x88, 0x80, 0x80, 0x80, 0x10})).ReadTag(&field, &type));
  EXPECT_EQ(field, 1u);
  EXPECT_FALSE(Over(Bytes({0x88, 0x80})).ReadTag(&field, &type));
  EXPECT_FALSE(WireReader(std::string_view()).ReadTag(&field, &type));
}

TEST(WireFormatTest, LengthDelimitedStaysInsideInput) {
  std::string_view bytes;
  const std::string abc = Bytes({0x03, 'a', 'b', 'c'});
  WireReader exact(abc);
  ASSERT_TRUE(exact.ReadLengthDelimited(&bytes));
  EXPECT_EQ(bytes, "abc");
  EXPECT_TRUE(exact.AtEnd());
  EXPECT_FALSE(Over(Bytes({0x04, 'a', 'b', 'c'})).ReadLengthDelimited(&bytes));
  const std::string zero_length = Bytes({0x00});
  WireReader empty(zero_length);
  ASSERT_TRUE(empty.ReadLengthDelimited(&bytes));
  EXPECT_TRUE(bytes.empty());
  // Huge lengths never wrap around the bounds check.
  EXPECT_FALSE(Over(Bytes({0xff, 0xff, 0xff, 0xff, 0x07, 'a'})).ReadLengthDelimited(&bytes));
  EXPECT_FALSE(Over(Bytes({0xff, 0xff, 0xff, 0xff, 0x0f, 'a'})).ReadLengthDelimited(&bytes));
  // A length takes at most five bytes, even with a small value.
  EXPECT_FALSE(Over(Bytes({0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 'a'})).ReadLengthDelimited(&bytes));
  const std::string padded = Bytes({0x81, 0x80, 0x80, 0x80, 0x00, 'a'});
  ASSERT_TRUE(WireReader(padded).ReadLengthDelimited(&bytes));
  EXPECT_EQ(bytes, "a");
}

TEST(WireFormatTest, FixedValuesAreLittleEndianAndBoundsChecked) {
  uint32_t v32 = 0;
  uint64_t v64 = 0;
  ASSERT_TRUE(Over(Bytes({0x78, 0x56, 0x34, 0x12})).ReadFixed32(&v32));
  EXPECT_EQ(v32, 0x12345678u);
  EXPECT_FALSE(Over(Bytes({0x78, 0x56, 0x34})).ReadFixed32(&v32));
  ASSERT_TRUE(Over(Bytes({1, 2, 3, 4, 5, 6, 7, 0x88})).ReadFixed64(&v64));
  EXPECT_EQ(v64, 0x8807060504030201u);
  EXPECT_FALSE(Over(Bytes({1, 2, 3, 4, 5, 6, 7})).ReadFixed64(&v64));
}

TEST(WireFormatTest, ReadFieldConsumesEveryAcceptedWireType) {
  const std::string input = Bytes({0x08, 0x96, 0x01,                         // 1: varint 150
                                   0x11, 1,    0,    0,    0,   0, 0, 0, 0,  // 2: fixed64 1
                                   0x1a, 0x02, 'h',  'i',                    // 3: "hi"
                                   0x25, 0xff, 0xff, 0xff, 0xff});           // 4: fixed32
  WireReader reader(input);
  WireField field;
  ASSERT_TRUE(reader.ReadField(&field));
  EXPECT_EQ(field.field_number, 1u);
  EXPECT_EQ(field.number_value, 150u);
  ASSERT_TRUE(reader.ReadField(&field));
  EXPECT_EQ(field.type, WireType::kFixed64);
  EXPECT_EQ(field.number_value, 1u);
  ASSERT_TRUE(reader.ReadField(&field));
  EXPECT_EQ(field.type, WireType::kLengthDelimited);
  EXPECT_EQ(field.bytes, "hi");
  ASSERT_TRUE(reader.ReadField(&field));
  EXPECT_EQ(field.type, WireType::kFixed32);
  EXPECT_EQ(field.number_value, 0xffffffffu);
  EXPECT_TRUE(reader.AtEnd());
  // Every strict prefix fails somewhere before the end.
  for (size_t cut = 1; cut < input.size(); ++cut) {
    WireReader truncated(std::string_view{input}.substr(0, cut));
    bool ok = true;
    while (ok && !truncated.AtEnd()) {
      ok = truncated.ReadField(&field);
    }
    const bool at_boundary = cut == 3 || cut == 12 || cut == 16;
    EXPECT_EQ(ok, at_boundary) << "cut at " << cut;
  }
}

TEST(WireFormatTest, SizeSinkCountsWhatStringSinkWrites) {
  std::string out;
  StringSink sink(&out);
  SizeSink size;
  const auto write_all = [](auto& s) {
    PutVarintField(s, 1, 0);  // default: omitted
    PutVarintField(s, 2, 300);
    PutVarintField(s, 3, Int32ToVarint(-5));
    PutStringField(s, 4, "");  // default: omitted
    PutStringField(s, 5, "text");
    PutLengthDelimitedAlways(s, 6, "");
    PutStringField(s, kMaxFieldNumber, std::string(200, 'x'));
  };
  write_all(sink);
  write_all(size);
  EXPECT_EQ(size.size(), out.size());
  EXPECT_EQ(out.substr(0, 3), Bytes({0x10, 0xac, 0x02}));
  EXPECT_EQ(out.substr(3, 11),
            Bytes({0x18, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  EXPECT_EQ(out.substr(14, 8), Bytes({0x2a, 0x04, 't', 'e', 'x', 't', 0x32, 0x00}));
}

TEST(WireFormatTest, Utf8ValidationFollowsUnicodeTable) {
  const std::vector<std::string> valid = {"",
                                          "ascii",
                                          std::string(1, '\0'),
                                          "\xc2\x80",
                                          "\xdf\xbf",
                                          "\xe0\xa0\x80",
                                          "\xed\x9f\xbf",
                                          "\xee\x80\x80",
                                          "\xef\xbf\xbf",
                                          "\xf0\x90\x80\x80",
                                          "\xf4\x8f\xbf\xbf",
                                          "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80"};
  const std::vector<std::string> invalid = {"\x80",
                                            "\xbf",
                                            "\xc0\x80",
                                            "\xc1\xbf",
                                            "\xc2",
                                            "\xc2\x41",
                                            "\xe0\x80\x80",
                                            "\xe0\x9f\xbf",
                                            "\xed\xa0\x80",
                                            "\xed\xbf\xbf",
                                            "\xe1\x80",
                                            "\xf0\x80\x80\x80",
                                            "\xf0\x8f\xbf\xbf",
                                            "\xf4\x90\x80\x80",
                                            "\xf5\x80\x80\x80",
                                            "\xf8\x88\x80\x80\x80",
                                            "\xff",
                                            "ok\xfe"};
  for (const std::string& s : valid) {
    EXPECT_TRUE(IsValidUtf8(s)) << testing::PrintToString(s);
  }
  for (const std::string& s : invalid) {
    EXPECT_FALSE(IsValidUtf8(s)) << testing::PrintToString(s);
  }
}

TEST(WireFormatTest, ToValidUtf8ReplacesMaximalInvalidSubparts) {
  const std::string kFffd = "\xef\xbf\xbd";
  EXPECT_EQ(ToValidUtf8("plain"), "plain");
  EXPECT_EQ(ToValidUtf8("a\xffz"), "a" + kFffd + "z");
  // A truncated three-byte sequence is one unit; a stray continuation is one.
  EXPECT_EQ(ToValidUtf8("\xe4\xb8z\x80"), kFffd + "z" + kFffd);
  // An encoded surrogate: ED A0 is not a valid prefix, so ED and each
  // following byte are replaced separately.
  EXPECT_EQ(ToValidUtf8("\xed\xa0\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(ToValidUtf8("\xf0\x9f\x98"), kFffd);
  for (const std::string s : {"\xc0", "\xf4\x90", "x\xe0\x80y", "\xf0\x9f\x98\x80\xf0"}) {
    EXPECT_TRUE(IsValidUtf8(ToValidUtf8(s)));
  }
}

}  // namespace
}  // namespace gpuctl::wire
