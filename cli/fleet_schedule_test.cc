// `gpuctl schedule` across fake gpuctlds (the real daemons:
// test/e2e/test_schedule.py).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/cli.h"
#include "cli/exit_codes.h"
#include "cli/fake_gpuctl_service_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::cli {
namespace {

using ::gpuctl::cli::testing::FakeServer;
using ::gpuctl::cli::testing::TestConsole;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kFingerprint[] = "3f2a9c1b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";

v1::GetScheduleResponse Schedule(const std::string& host) {
  v1::GetScheduleResponse s;
  s.set_host(host);
  s.set_enabled(true);
  s.set_fingerprint(kFingerprint);
  s.set_max_duty_cycle(0.05);
  v1::ScheduleRuleInfo* rule = s.add_rules();
  rule->set_name("hourly");
  rule->set_selector("job \"42\"");
  rule->set_probability(0.25);
  rule->mutable_period()->set_seconds(3600);
  rule->mutable_window()->set_seconds(10);
  rule->set_duty_cycle(0.25 * 10 / 3600);
  rule->set_daily_cap(4);
  rule->add_blackouts("Sat,Sun 00-24 UTC");
  rule->set_driven(true);
  rule->add_next_slots()->set_seconds(1714568400);  // 2024-05-01 13:00:00 UTC
  s.mutable_capture_time_per_day()->set_seconds(600);
  s.mutable_capture_time_today()->set_seconds(20);
  s.set_captures_today(2);
  s.set_skips_today(1);
  v1::ScheduleEvent* capture = s.add_events();
  capture->set_rule("hourly");
  capture->set_job_id("42");
  capture->set_slot(477379);
  capture->set_outcome("capture");
  capture->set_captured(true);
  capture->set_trace_id("018f3a2b-0000-7000-8000-000000000001");
  capture->mutable_decided_at()->set_seconds(1714564805);  // 2024-05-01 12:00:05 UTC
  capture->mutable_start_time()->set_seconds(1714564860);
  v1::ScheduleEvent* skip = s.add_events();
  skip->set_rule("hourly");
  skip->set_job_id("42");
  skip->set_slot(477380);
  skip->set_outcome("host capture time per day spent (local, may split a job)");
  skip->set_local(true);
  return s;
}

v1::PreviewSlot Slot(int64_t slot, const std::string& trace_id) {
  v1::PreviewSlot p;
  p.set_rule("hourly");
  p.set_slot(slot);
  p.mutable_start_time()->set_seconds(slot * 3600 + 120);
  p.mutable_window()->set_seconds(10);
  p.set_trace_id(trace_id);
  p.set_outcome("capture");
  return p;
}

class CliFleetScheduleTest : public ::testing::Test {
 protected:
  CliFleetScheduleTest() {
    a_.service().schedule = Schedule("node1");
    b_.service().schedule = Schedule("node2");
  }
  int Run(const std::vector<std::string>& args) { return RunCli(args, console_.env()); }

  FakeServer a_;
  FakeServer b_;
  TestConsole console_;
};

TEST_F(CliFleetScheduleTest, ShowsRulesBudgetAndEventsPerHost) {
  ASSERT_EQ(Run({"schedule", "--host", a_.target()}), kExitOk) << console_.err.str();
  const std::string out = console_.out.str();
  EXPECT_THAT(out, HasSubstr(absl::StrCat("host ", a_.target(),
                                          " (node1): schedule 3f2a9c1b4d5e6f70, duty cycle "
                                          "ceiling 5%")));
  EXPECT_THAT(out,
              HasSubstr("hourly  job \"42\"         0.25      1h     10s  0.0694444%          4"));
  EXPECT_THAT(out, HasSubstr("Sat,Sun 00-24 UTC  2024-05-01 13:00:00"));
  EXPECT_THAT(out, HasSubstr("today (UTC): 2 captures, 1 skips; capture time 20s of 10m per day"));
  EXPECT_THAT(out,
              HasSubstr("2024-05-01 12:00:05  hourly  42   477379  2024-05-01 12:01:00  capture"));
  EXPECT_THAT(out, HasSubstr("  018f3a2b-0000-7000-8000-000000000001\n"));
  EXPECT_THAT(out, HasSubstr("host capture time per day spent (local, may split a job)"));
  ASSERT_EQ(a_.service().schedule_requests().size(), 1u);
  EXPECT_EQ(a_.service().schedule_requests()[0].next_slots(), 3u);
  EXPECT_EQ(a_.service().schedule_requests()[0].preview_job(), "");
}

TEST_F(CliFleetScheduleTest, AStepRuleStartsByStepNumber) {
  v1::ScheduleRuleInfo* rule = a_.service().schedule.add_rules();
  rule->set_name("blocks");
  rule->set_selector("job \"42\"");
  rule->set_probability(0.5);
  rule->set_step_period(1000);
  rule->set_window_steps(20);
  rule->set_driven(true);
  ASSERT_EQ(Run({"schedule", "--host", a_.target()}), kExitOk) << console_.err.str();
  EXPECT_THAT(console_.out.str(), HasSubstr("1000 steps  20 steps"));
  EXPECT_THAT(console_.out.str(), HasSubstr("by step number"));
  EXPECT_THAT(console_.out.str(), ::testing::Not(HasSubstr("not driven")));
}

TEST_F(CliFleetScheduleTest, NamesHostsRunningAnotherSchedule) {
  b_.service().schedule.set_fingerprint(std::string(64, 'e'));
  ASSERT_EQ(Run({"schedule", "--host", a_.target(), "--host", b_.target()}), kExitOk);
  EXPECT_THAT(console_.err.str(),
              HasSubstr(absl::StrCat("hosts running another schedule than ", a_.target(),
                                     " (3f2a9c1b4d5e6f70): ", b_.target(), " (eeeeeeeeeeeeeeee)")));
  EXPECT_THAT(console_.out.str(), HasSubstr("(node2): schedule eeeeeeeeeeeeeeee"));

  TestConsole json_console;
  ASSERT_EQ(RunCli({"schedule", "--json", "--host", a_.target()}, json_console.env()), kExitOk);
  nlohmann::json json = nlohmann::json::parse(json_console.out.str());
  EXPECT_EQ(json["hosts"][0]["schedule"]["fingerprint"], kFingerprint);
  EXPECT_EQ(json["hosts"][0]["schedule"]["rules"][0]["name"], "hourly");
}

// A host whose clock is off opens its windows out of step with the others:
// it is named, with its offset as measured around the call.
TEST_F(CliFleetScheduleTest, NamesAHostWhoseClockIsOff) {
  // The fakes answer with a fixed `now`: a's is this machine's clock when
  // the test starts, well within the 50 ms tolerance of the call.
  const int64_t now_ns = absl::ToUnixNanos(absl::Now());
  a_.service().schedule.mutable_now()->set_seconds(now_ns / 1'000'000'000);
  a_.service().schedule.mutable_now()->set_nanos(static_cast<int32_t>(now_ns % 1'000'000'000));
  b_.service().schedule.mutable_now()->set_seconds(now_ns / 1'000'000'000 - 30);
  ASSERT_EQ(Run({"schedule", "--json", "--host", a_.target(), "--host", b_.target()}), kExitOk);
  EXPECT_THAT(console_.err.str(), HasSubstr(absl::StrCat(b_.target(), "'s clock is ")));
  EXPECT_THAT(console_.err.str(), HasSubstr(" behind this machine's (+-"));
  EXPECT_THAT(console_.err.str(), Not(HasSubstr(absl::StrCat(a_.target(), "'s clock"))));
  nlohmann::json json = nlohmann::json::parse(console_.out.str());
  EXPECT_LT(json["hosts"][1]["clock_offset_ms"].get<double>(), -28000);
  EXPECT_GT(json["hosts"][1]["clock_offset_ms"].get<double>(), -32000);
}

TEST_F(CliFleetScheduleTest, PreviewIsAskedOfEveryHostAndDisagreementsFail) {
  for (FakeServer* s : {&a_, &b_}) {
    *s->service().schedule.add_preview() = Slot(477381, "018f3a2b-0000-7000-8000-00000000000a");
    *s->service().schedule.add_preview() = Slot(477385, "018f3a2b-0000-7000-8000-00000000000b");
  }
  ASSERT_EQ(Run({"schedule", "--preview", "--job", "42", "--hours", "48", "--host", a_.target(),
                 "--host", b_.target()}),
            kExitOk)
      << console_.err.str();
  EXPECT_THAT(console_.out.str(), HasSubstr("START                RULE      SLOT  WINDOW  OUTCOME  "
                                            "TRACE ID"));
  EXPECT_THAT(console_.out.str(),
              HasSubstr("hourly  477385     10s  capture  018f3a2b-0000-7000-8000-00000000000b"));
  EXPECT_THAT(console_.out.str(), Not(HasSubstr("RULE      SELECTOR")));
  for (FakeServer* s : {&a_, &b_}) {
    ASSERT_EQ(s->service().schedule_requests().size(), 1u);
    EXPECT_EQ(s->service().schedule_requests()[0].preview_job(), "42");
    EXPECT_EQ(s->service().schedule_requests()[0].preview_duration().seconds(), 48 * 3600);
  }

  b_.service().schedule.mutable_preview(1)->set_outcome("daily cap reached");
  TestConsole differ;
  EXPECT_EQ(
      RunCli({"schedule", "--preview", "--job", "42", "--host", a_.target(), "--host", b_.target()},
             differ.env()),
      kExitPartialFailure);
  EXPECT_THAT(differ.err.str(), HasSubstr(absl::StrCat("would capture job 42 in other slots than ",
                                                       a_.target(), ": ", b_.target())));
}

TEST_F(CliFleetScheduleTest, FlagsAreChecked) {
  EXPECT_EQ(Run({"schedule", "--preview", "--host", a_.target()}), kExitUsage);
  EXPECT_THAT(console_.err.str(), HasSubstr("--preview needs --job ID"));
  TestConsole job_alone;
  EXPECT_EQ(RunCli({"schedule", "--job", "42", "--host", a_.target()}, job_alone.env()),
            kExitUsage);
  EXPECT_THAT(job_alone.err.str(), HasSubstr("--job goes with --preview"));
  TestConsole hours;
  EXPECT_EQ(
      RunCli({"schedule", "--preview", "--job", "42", "--hours", "169", "--host", a_.target()},
             hours.env()),
      kExitUsage);
  EXPECT_THAT(hours.err.str(), HasSubstr("--hours"));
  EXPECT_TRUE(a_.service().schedule_requests().empty());
}

}  // namespace
}  // namespace gpuctl::cli
