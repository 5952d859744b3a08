#include "daemon/convert/json_writer.h"

#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {
namespace {

std::string Json(absl::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

TEST(JsonWriterTest, EscapesSpecialCharacters) {
  EXPECT_EQ(Json("plain"), "\"plain\"");
  EXPECT_EQ(Json("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Json("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(Json(std::string("\x01\x1f\0", 3)), R"("\u0001\u001f\u0000")");
  EXPECT_EQ(Json("/<>"), "\"/<>\"");
}

TEST(JsonWriterTest, KeepsValidUtf8AndReplacesInvalid) {
  EXPECT_EQ(Json("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(Json("\xff"), R"("\ufffd")");
  EXPECT_EQ(Json("a\xc3"), R"("a\ufffd")");                              // truncated
  EXPECT_EQ(Json("\xc0\xaf"), R"("\ufffd\ufffd")");                      // overlong
  EXPECT_EQ(Json("\xe0\x80\xaf"), R"("\ufffd\ufffd\ufffd")");            // overlong
  EXPECT_EQ(Json("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");            // surrogate
  EXPECT_EQ(Json("\xf4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");  // > U+10FFFF
  // Every byte value parses as JSON.
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  auto parsed = nlohmann::json::parse(Json(all));
  EXPECT_TRUE(parsed.is_string());
}

TEST(JsonWriterTest, FormatsMicrosWithNanoFraction) {
  auto fmt = [](int64_t ns) {
    std::string s;
    AppendMicrosFromNanos(&s, ns);
    return s;
  };
  EXPECT_EQ(fmt(0), "0.000");
  EXPECT_EQ(fmt(1234567), "1234.567");
  EXPECT_EQ(fmt(5), "0.005");
  EXPECT_EQ(fmt(-1500), "-1.500");
  EXPECT_EQ(fmt(std::numeric_limits<int64_t>::min()), "-9223372036854775.808");
}

}  // namespace
}  // namespace gpuctl::daemon
