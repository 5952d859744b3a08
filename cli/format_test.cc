#include "cli/format.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

TEST(CliHumanBytesTest, Table) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1024), "1.0 KiB");
  EXPECT_EQ(HumanBytes(12595), "12.3 KiB");
  EXPECT_EQ(HumanBytes(1048575), "1.0 MiB");
  EXPECT_EQ(HumanBytes(5ull << 30), "5.0 GiB");
  EXPECT_EQ(HumanBytes(~0ull), "16.0 EiB");
}

TEST(CliWordsTest, StatusPhaseState) {
  EXPECT_EQ(StatusWord(v1::CAPTURE_STATUS_OK), "ok");
  EXPECT_EQ(StatusWord(v1::CAPTURE_STATUS_TIMED_OUT), "timed out");
  EXPECT_EQ(StatusWord(v1::CAPTURE_STATUS_REJECTED), "rejected");
  EXPECT_EQ(StatusWord(static_cast<v1::CaptureStatus>(99)), "unknown (99)");
  EXPECT_EQ(PhaseWord(v1::PROCESS_PHASE_PROCESSING), "processing");
  EXPECT_EQ(CaptureStateWord(v1::CAPTURE_STATE_COLLECTING), "collecting");
  EXPECT_EQ(RankText(-1), "-");
  EXPECT_EQ(RankText(3), "3");
}

TEST(CliCommandTextTest, TruncatesAndSanitizes) {
  google::protobuf::RepeatedPtrField<std::string> argv;
  EXPECT_EQ(CommandText(argv, 10), "-");
  *argv.Add() = "python";
  *argv.Add() = "train.py";
  EXPECT_EQ(CommandText(argv, 15), "python train.py");
  EXPECT_EQ(CommandText(argv, 10), "python ...");
  *argv.Add() = "\x1b]0;pwned\x07";
  EXPECT_EQ(CommandText(argv, 100), "python train.py ?]0;pwned?");
}

TEST(CliCommandTextTest, ShowsTheProgramByNameSoTheScriptFitsAndWideShowsAll) {
  google::protobuf::RepeatedPtrField<std::string> argv;
  *argv.Add() = "/home/u/.pyenv/versions/3.11.9/envs/train-env/bin/python3";
  *argv.Add() = "train.py";
  *argv.Add() = "--lr";
  *argv.Add() = "3e-4";
  EXPECT_EQ(CommandText(argv, 40), "python3 train.py --lr 3e-4");
  EXPECT_EQ(CommandText(argv, 12), "python3 t...");
  *argv.Add() = std::string(100, 'x');
  EXPECT_EQ(CommandText(argv, 0).size(), std::string("python3 train.py --lr 3e-4 ").size() + 100);
  // A trailing slash keeps the path: there is no name to show.
  google::protobuf::RepeatedPtrField<std::string> dir;
  *dir.Add() = "/odd/";
  EXPECT_EQ(CommandText(dir, 40), "/odd/");
}

TEST(CliTimestampTextTest, Formats) {
  google::protobuf::Timestamp ts;
  EXPECT_EQ(TimestampText(ts, absl::UTCTimeZone()), "-");
  ts.set_seconds(1714566896);
  EXPECT_EQ(TimestampText(ts, absl::UTCTimeZone()), "2024-05-01 12:34:56");
  EXPECT_EQ(TimestampText(ts, absl::FixedTimeZone(3600)), "2024-05-01 13:34:56");
}

TEST(CliTableTest, AlignsColumnsAndNotes) {
  Table table({"NAME", "SIZE", "NOTE"}, {false, true, false});
  table.AddRow({"a", "1", "x"});
  table.AddRow({"longer", "12345", ""}, "why it failed");
  std::ostringstream out;
  table.Render(out);
  EXPECT_EQ(out.str(),
            "NAME     SIZE  NOTE\n"
            "a           1  x\n"
            "longer  12345  \n"
            "    why it failed\n");
  EXPECT_EQ(table.rows(), 2u);
}

TEST(CliToJsonTest, PrintsZeros) {
  v1::ProcessResult r;
  r.set_pid(5);
  EXPECT_THAT(ToJson(r), ::testing::HasSubstr("\"rank\":0"));
  EXPECT_THAT(ToJson(r), ::testing::HasSubstr("\"pid\":5"));
}

TEST(CliToJsonTest, PrintsEveryObjectWithItsKeysSorted) {
  // Protobuf's own printer follows its maps' hash order, which varies.
  for (int i = 0; i < 20; ++i) {
    google::protobuf::Struct root;
    auto& f = *root.mutable_fields();
    for (const char* key : {"traceId", "window", "startTime", "maxStartSkew", "duration"}) {
      f[key].set_string_value(key);
    }
    f["hosts"].mutable_list_value()->add_values()->mutable_struct_value();
    auto& host =
        *f["hosts"].mutable_list_value()->add_values()->mutable_struct_value()->mutable_fields();
    host["status"].set_string_value("ok \"quoted\"");
    host["error"].set_null_value(google::protobuf::NULL_VALUE);
    host["processesOk"].set_number_value(4194304);
    host["half"].set_number_value(0.5);
    host["done"].set_bool_value(true);
    EXPECT_EQ(ToJson(root),
              "{\"duration\":\"duration\",\"hosts\":[{},{\"done\":true,\"error\":null,"
              "\"half\":0.5,\"processesOk\":4194304,\"status\":\"ok \\\"quoted\\\"\"}],"
              "\"maxStartSkew\":\"maxStartSkew\",\"startTime\":\"startTime\","
              "\"traceId\":\"traceId\",\"window\":\"window\"}");
  }
  v1::ProcessInfo process;
  for (const char* key : {"zone", "team", "app", "k8s.pod", "batch"}) {
    (*process.mutable_labels())[key] = "v";
  }
  const std::string json = ToJson(process);
  EXPECT_THAT(json, ::testing::HasSubstr("\"labels\":{\"app\":\"v\",\"batch\":\"v\",\"k8s.pod\":"
                                         "\"v\",\"team\":\"v\",\"zone\":\"v\"}"));
}

}  // namespace
}  // namespace gpuctl::cli
