#include "daemon/kineto/dyno_rpc_handler.h"

#include <string>

#include "daemon/core/testing/core_test_fixture.h"
#include "daemon/core/testing/mock_daemon_core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using DynoJson = nlohmann::json;

// The request `dyno gputrace` builds (cli/src/commands/gputrace.rs), with
// its config text.
std::string GputraceRequest(const std::string& job, const std::string& pids, int limit,
                            const std::string& config) {
  DynoJson request = {{"fn", "setKinetOnDemandRequest"},
                      {"config", config},
                      {"job_id", DynoJson::parse(job)},
                      {"pids", DynoJson::parse("[" + pids + "]")},
                      {"process_limit", limit}};
  return request.dump();
}

constexpr char kTwoSeconds[] =
    "ACTIVITIES_LOG_FILE=/tmp/dyno.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=2000\n"
    "PROFILE_REPORT_INPUT_SHAPES=false\nPROFILE_WITH_STACK=true\nPROFILE_WITH_FLOPS=false\n"
    "PROFILE_WITH_MODULES=false";

class DynoRpcHandlerTest : public DaemonCoreTest {
 protected:
  DynoJson Call(const std::string& body) {
    DynoRpcHandler handler(core_.get(), "1.2.3");
    std::string reply = handler.Handle(body);
    DynoJson parsed = DynoJson::parse(reply, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << reply;
    return parsed;
  }
};

TEST_F(DynoRpcHandlerTest, StatusAndVersion) {
  EXPECT_EQ(Call(R"({"fn":"getStatus"})"), DynoJson::parse(R"({"status": 1})"));
  EXPECT_EQ(Call(R"({"fn":"getVersion"})")["version"], "1.2.3");
}

TEST_F(DynoRpcHandlerTest, MalformedRequestsGetAnErrorReply) {
  EXPECT_THAT(Call("{not json").value("status", ""), HasSubstr("failed: the request is not"));
  EXPECT_THAT(Call("[1]").value("status", ""), HasSubstr("not a JSON object"));
  EXPECT_THAT(Call(R"({"x": 1})").value("status", ""), HasSubstr("no \"fn\""));
  EXPECT_THAT(Call(R"({"fn": "dcgmProfPause"})").value("status", ""),
              HasSubstr("unknown fn \"dcgmProfPause\""));
  DynoJson no_config = Call(R"({"fn": "setKinetOnDemandRequest", "pids": []})");
  EXPECT_THAT(no_config.value("status", ""), HasSubstr("needs \"config\""));
  // dyno reads processesMatched from every reply: it is always there.
  EXPECT_EQ(no_config["processesMatched"], DynoJson::array());
  EXPECT_THAT(Call(GputraceRequest("-3", "0", 3, "")).value("status", ""), HasSubstr("job_id"));
  EXPECT_THAT(Call(GputraceRequest("1", "-1", 3, "")).value("status", ""), HasSubstr("pids"));
  EXPECT_THAT(Call(GputraceRequest("1", "0", 3, "ACTIVITIES_DURATION_MSECS=x")).value("status", ""),
              HasSubstr("config line 1: ACTIVITIES_DURATION_MSECS"));
  for (PeerId peer : {PeerId{1}}) EXPECT_TRUE(peers_.SentTo(peer).empty());
}

TEST_F(DynoRpcHandlerTest, GputraceOfAJobTracesItsRanks) {
  Attach(1, 101, "42", 0);
  Attach(2, 102, "42", 1);
  Attach(3, 103, "7", 0);
  DynoJson reply = Call(GputraceRequest("42", "0", 3, kTwoSeconds));
  EXPECT_FALSE(reply.contains("status")) << reply;
  EXPECT_THAT(reply["processesMatched"].get<std::vector<int>>(), UnorderedElementsAre(101, 102));
  EXPECT_THAT(reply["activityProfilersTriggered"].get<std::vector<int>>(),
              UnorderedElementsAre(101, 102));
  EXPECT_EQ(reply["activityProfilersBusy"], 0);
  EXPECT_EQ(reply["eventProfilersTriggered"], DynoJson::array());
  EXPECT_EQ(reply["eventProfilersBusy"], 0);
  EXPECT_THAT(reply["ignoredConfigKeys"].get<std::vector<std::string>>(),
              ElementsAre("ACTIVITIES_LOG_FILE"));
  const std::string trace_id = reply["traceId"];
  for (PeerId peer : {PeerId{1}, PeerId{2}}) {
    auto starts = StartsTo(peer);
    ASSERT_EQ(starts.size(), 1u);
    EXPECT_EQ(starts[0].trace_id(), trace_id);
    EXPECT_EQ(starts[0].duration_ns(), 2'000'000'000);
  }
  EXPECT_TRUE(StartsTo(3).empty());
}

TEST_F(DynoRpcHandlerTest, ProcessLimitAndPidsNarrowTheSelection) {
  Attach(1, 101, "42", 0);
  Attach(2, 102, "42", 1);
  Attach(3, 103, "42", 2);
  DynoJson limited = Call(GputraceRequest("42", "0", 1, kTwoSeconds));
  EXPECT_EQ(limited["processesMatched"].size(), 3u);
  EXPECT_THAT(limited["activityProfilersTriggered"].get<std::vector<int>>(), ElementsAre(101));

  DynoJson by_pid = Call(GputraceRequest("0", "103", 3, kTwoSeconds));
  EXPECT_THAT(by_pid["processesMatched"].get<std::vector<int>>(), ElementsAre(103));
  EXPECT_THAT(by_pid["activityProfilersTriggered"].get<std::vector<int>>(), ElementsAre(103));

  DynoJson none = Call(GputraceRequest("42", "0", 0, kTwoSeconds));
  EXPECT_EQ(none["processesMatched"].size(), 3u);
  EXPECT_EQ(none["activityProfilersTriggered"], DynoJson::array());
}

TEST_F(DynoRpcHandlerTest, JobZeroIsTheProcessesWithoutAJob) {
  Attach(1, 101, "", 0);
  Attach(2, 102, "42", 0);
  DynoJson reply = Call(GputraceRequest("0", "0", 3, kTwoSeconds));
  EXPECT_THAT(reply["processesMatched"].get<std::vector<int>>(), ElementsAre(101));
  EXPECT_THAT(reply["activityProfilersTriggered"].get<std::vector<int>>(), ElementsAre(101));
  // A string job id, as newer tools send it, works the same.
  DynoJson by_string = Call(GputraceRequest("\"42\"", "", 3, kTwoSeconds));
  EXPECT_THAT(by_string["processesMatched"].get<std::vector<int>>(), ElementsAre(102));
}

TEST_F(DynoRpcHandlerTest, NothingMatchedIsWhatDynoExpects) {
  Attach(1, 101, "42", 0);
  DynoJson reply = Call(GputraceRequest("43", "0", 3, kTwoSeconds));
  EXPECT_EQ(reply["processesMatched"], DynoJson::array());
  EXPECT_EQ(reply["activityProfilersTriggered"], DynoJson::array());
  EXPECT_FALSE(reply.contains("traceId"));
  EXPECT_TRUE(StartsTo(1).empty());
}

TEST_F(DynoRpcHandlerTest, ABusyProcessIsCountedAsBusy) {
  Attach(1, 101, "42", 0);
  Attach(2, 102, "42", 1);
  ASSERT_TRUE(Trace("42", absl::Seconds(5), std::make_shared<RecordingObserver>(), {102}).ok());
  DynoJson reply = Call(GputraceRequest("42", "0", 3, kTwoSeconds));
  EXPECT_THAT(reply["processesMatched"].get<std::vector<int>>(), UnorderedElementsAre(101, 102));
  EXPECT_THAT(reply["activityProfilersTriggered"].get<std::vector<int>>(), ElementsAre(101));
  EXPECT_EQ(reply["activityProfilersBusy"], 1);
}

TEST_F(DynoRpcHandlerTest, ARequestTheCoreRefusesSaysWhy) {
  Attach(1, 101, "42", 0);
  // A start time a day in the past: no window can open then.
  const int64_t past_ms = absl::ToUnixMillis(clock_.Now() - absl::Hours(24));
  DynoJson reply = Call(GputraceRequest(
      "42", "0", 3,
      "PROFILE_START_TIME=" + std::to_string(past_ms) + "\nACTIVITIES_DURATION_MSECS=1000"));
  EXPECT_THAT(reply.value("status", ""), HasSubstr("failed: "));
  EXPECT_THAT(reply["processesMatched"].get<std::vector<int>>(), ElementsAre(101));
  EXPECT_EQ(reply["activityProfilersTriggered"], DynoJson::array());
  EXPECT_TRUE(StartsTo(1).empty());
}

// What reaches the core, exactly: the window, the profiler flags and the
// selector, from dyno's own config text.
TEST(DynoRpcHandlerRequestTest, TheTraceRequestCarriesTheWindowAndTheProfilerFlags) {
  MockDaemonCore core;
  v1::ListProcessesResponse listed;
  for (int pid : {101, 102}) {
    v1::ProcessInfo* p = listed.add_processes();
    p->set_pid(pid);
    p->set_job_id("42");
    p->set_role(v1::PROCESS_ROLE_WORKER);
  }
  EXPECT_CALL(core, ListProcesses(::testing::_)).WillOnce(::testing::Return(listed));
  v1::TraceRequest seen;
  EXPECT_CALL(core, StartTrace(::testing::_, ::testing::_, ::testing::_))
      .WillOnce([&](const v1::TraceRequest& request, const v1::TraceTrigger& trigger,
                    const std::shared_ptr<TraceObserver>& observer) {
        seen = request;
        EXPECT_EQ(trigger.kind(), v1::TRIGGER_KIND_ON_DEMAND);
        EXPECT_EQ(trigger.requested_by(), "dynolog RPC (loopback)");
        v1::TraceEvent started;
        started.mutable_started()->set_trace_id("018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b");
        started.mutable_started()->add_processes()->set_pid(101);
        observer->OnEvent(started);
        return absl::StatusOr<std::string>("018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b");
      });
  DynoRpcHandler handler(&core, "1.2.3");
  DynoJson reply = DynoJson::parse(handler.Handle(GputraceRequest(
      "42", "0", 1,
      "ACTIVITIES_LOG_FILE=/tmp/x.json\nPROFILE_START_TIME=1790000000500\n"
      "ACTIVITIES_DURATION_MSECS=1500\nPROFILE_REPORT_INPUT_SHAPES=true\n"
      "PROFILE_WITH_STACK=true\nPROFILE_WITH_FLOPS=false\nPROFILE_WITH_MODULES=true")));
  EXPECT_EQ(seen.selector().job_id(), "42");
  EXPECT_EQ(seen.selector().pids_size(), 0);
  EXPECT_EQ(seen.selector().limit(), 1u);  // process_limit below the 2 matched
  EXPECT_EQ(seen.duration().seconds(), 1);
  EXPECT_EQ(seen.duration().nanos(), 500000000);
  EXPECT_EQ(seen.start_time().seconds(), 1790000000);
  EXPECT_EQ(seen.start_time().nanos(), 500000000);
  EXPECT_THAT(seen.kineto_options(), ::testing::Contains("record_shapes"));
  EXPECT_THAT(seen.kineto_options(), ::testing::Contains("with_stack"));
  EXPECT_THAT(seen.kineto_options(), ::testing::Not(::testing::Contains("with_flops")));
  EXPECT_THAT(seen.kineto_options(), ::testing::Contains("with_modules"));
  EXPECT_THAT(seen.kineto_options(), ::testing::Not(::testing::Contains("profile_memory")));
  EXPECT_THAT(reply["processesMatched"].get<std::vector<int>>(), ElementsAre(101, 102));
  EXPECT_THAT(reply["activityProfilersTriggered"].get<std::vector<int>>(), ElementsAre(101));
  EXPECT_EQ(reply["traceId"], "018cc251-f47b-7c4d-9a2b-3c4d5e6f7a8b");
}

}  // namespace
}  // namespace gpuctl::daemon
