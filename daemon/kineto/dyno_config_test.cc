#include "daemon/kineto/dyno_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What `dyno gputrace --log-file /tmp/t.json --duration-ms 2000
// --profile-start-time 1790000000123 --record-shapes --profile-memory
// --with-stacks` sends (cli/src/commands/gputrace.rs).
constexpr char kDurationConfig[] =
    "ACTIVITIES_LOG_FILE=/tmp/t.json\n"
    "PROFILE_START_TIME=1790000000123\n"
    "ACTIVITIES_DURATION_MSECS=2000\n"
    "PROFILE_REPORT_INPUT_SHAPES=true\n"
    "PROFILE_PROFILE_MEMORY=true\n"
    "PROFILE_MEMORY=true\n"
    "PROFILE_MEMORY_DURATION_MSECS=2000\n"
    "PROFILE_WITH_STACK=true\n"
    "PROFILE_WITH_FLOPS=false\n"
    "PROFILE_WITH_MODULES=false";

// `dyno gputrace --log-file /tmp/t.json --iterations 3
// --profile-start-iteration-roundup 10`.
constexpr char kIterationConfig[] =
    "ACTIVITIES_LOG_FILE=/tmp/t.json\n"
    "PROFILE_START_ITERATION=0\n"
    "PROFILE_START_ITERATION_ROUNDUP=10\n"
    "ACTIVITIES_ITERATIONS=3\n"
    "PROFILE_REPORT_INPUT_SHAPES=false\n"
    "PROFILE_WITH_STACK=false\n"
    "PROFILE_WITH_FLOPS=true\n"
    "PROFILE_WITH_MODULES=true";

TEST(DynoConfigTest, DurationModeAsDynoSendsIt) {
  auto config = ParseDynoConfig(kDurationConfig);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->duration, absl::Milliseconds(2000));
  EXPECT_EQ(config->start_time, absl::FromUnixMillis(1790000000123));
  EXPECT_EQ(config->iterations, 0u);
  EXPECT_TRUE(config->options.record_shapes());
  EXPECT_TRUE(config->options.profile_memory());
  EXPECT_TRUE(config->options.with_stack());
  EXPECT_FALSE(config->options.with_flops());
  // gpuctld picks where traces go; kineto's memory snapshot is not taken.
  EXPECT_THAT(config->ignored_keys, ElementsAre("ACTIVITIES_LOG_FILE", "PROFILE_MEMORY",
                                                "PROFILE_MEMORY_DURATION_MSECS"));

  v1::TraceRequest request = DynoTraceRequest(*config);
  EXPECT_EQ(request.duration().seconds(), 2);
  EXPECT_EQ(request.start_time().seconds(), 1790000000);
  EXPECT_EQ(request.start_time().nanos(), 123000000);
  EXPECT_EQ(request.iterations(), 0u);
  EXPECT_THAT(request.kineto_options(), ::testing::Contains("with_stack"));
  EXPECT_THAT(request.kineto_options(), ::testing::Contains("record_shapes"));
}

TEST(DynoConfigTest, IterationModeAsDynoSendsIt) {
  auto config = ParseDynoConfig(kIterationConfig);
  ASSERT_TRUE(config.ok()) << config.status();
  v1::TraceRequest request = DynoTraceRequest(*config);
  EXPECT_EQ(request.iterations(), 3u);
  EXPECT_EQ(request.step_roundup(), 10u);
  // PROFILE_START_ITERATION=0: the daemon picks the next multiple of 10.
  EXPECT_FALSE(request.has_start_step());
  EXPECT_FALSE(request.has_duration());  // bounded by the daemon's maximum
  EXPECT_FALSE(request.has_start_time());
  EXPECT_THAT(request.kineto_options(), ::testing::Contains("with_flops"));
  EXPECT_THAT(request.kineto_options(), ::testing::Contains("with_modules"));

  auto explicit_start = ParseDynoConfig("ACTIVITIES_ITERATIONS=2\nPROFILE_START_ITERATION=40");
  ASSERT_TRUE(explicit_start.ok());
  EXPECT_EQ(DynoTraceRequest(*explicit_start).start_step(), 40u);
}

TEST(DynoConfigTest, DefaultsAreKinetos) {
  auto config = ParseDynoConfig("");
  ASSERT_TRUE(config.ok());
  v1::TraceRequest request = DynoTraceRequest(*config);
  EXPECT_EQ(request.duration().nanos(), 500000000);  // kineto's 500 ms
  EXPECT_FALSE(request.has_start_time());
  // PROFILE_START_TIME=0 is "now", and ACTIVITIES_ITERATIONS <= 0 a time window.
  config = ParseDynoConfig("PROFILE_START_TIME=0\nACTIVITIES_ITERATIONS=-1\n");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(DynoTraceRequest(*config).has_start_time());
  EXPECT_EQ(DynoTraceRequest(*config).iterations(), 0u);
}

TEST(DynoConfigTest, SpacesCommentsAndUnknownKeys) {
  auto config = ParseDynoConfig(
      "  # a comment\n\n ACTIVITIES_DURATION_MSECS = 750 \r\nACTIVITIES_LOG_FILE=/etc/passwd\n"
      "ACTIVITIES_LOG_FILE=/x\nCUPTI_PROFILER_METRICS=x\nPROFILE_WITH_STACK=1");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->duration, absl::Milliseconds(750));
  EXPECT_TRUE(config->options.with_stack());
  EXPECT_THAT(config->ignored_keys, ElementsAre("ACTIVITIES_LOG_FILE", "CUPTI_PROFILER_METRICS"));
}

TEST(DynoConfigTest, BadValuesAreRefusedNamingTheLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"ACTIVITIES_DURATION_MSECS=0", "line 1: ACTIVITIES_DURATION_MSECS: 0 is outside"},
      {"ACTIVITIES_DURATION_MSECS=ten", "is not a whole number"},
      {"ACTIVITIES_DURATION_MSECS=99999999999", "is outside"},
      {"\nPROFILE_START_TIME=-5", "line 2: PROFILE_START_TIME"},
      {"ACTIVITIES_ITERATIONS=1000001", "is outside"},
      {"PROFILE_WITH_STACK=yes", "is not true or false"},
      {"PROFILE_START_ITERATION_ROUNDUP=-1", "is outside"},
      {"JUST TEXT", "line 1 \"JUST TEXT\" is not KEY=VALUE"},
  };
  for (const auto& [text, reason] : cases) {
    auto config = ParseDynoConfig(text);
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(config.status().message(), HasSubstr(reason)) << text;
  }
  EXPECT_THAT(ParseDynoConfig(std::string(kDynoMaxConfigBytes + 1, '#')).status().message(),
              HasSubstr("over the limit"));
}

}  // namespace
}  // namespace gpuctl::daemon
