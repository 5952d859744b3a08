#include "daemon/kineto/dyno_rpc_handler.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/excerpt.h"
#include "daemon/common/log.h"
#include "daemon/kineto/dyno_config.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {
namespace {

using DynoJson = nlohmann::json;

constexpr int64_t kDefaultProcessLimit = 1000;  // dynolog's
constexpr size_t kMaxPids = 4096;               // the selector's

struct TraceArgs {
  std::string config;
  std::string job_id;  // empty: processes without a job id
  std::vector<int32_t> pids;
  int64_t process_limit = kDefaultProcessLimit;
};

DynoJson PidList(const std::vector<int32_t>& pids) {
  DynoJson list = DynoJson::array();
  for (int32_t pid : pids) list.push_back(pid);
  return list;
}

// The fields `dyno gputrace` reads; it fails on a reply without them.
DynoJson TraceReply(const std::vector<int32_t>& matched, const std::vector<int32_t>& triggered,
                    int busy) {
  return {{"processesMatched", PidList(matched)},
          {"eventProfilersTriggered", DynoJson::array()},
          {"activityProfilersTriggered", PidList(triggered)},
          {"eventProfilersBusy", 0},
          {"activityProfilersBusy", busy}};
}

std::string Failed(DynoJson reply, absl::string_view why) {
  reply["status"] = ClampMessage(absl::StrCat("failed: ", why));
  return reply.dump(-1, ' ', false, DynoJson::error_handler_t::replace);
}

absl::StatusOr<std::string> ReadJobId(const DynoJson& request) {
  if (!request.contains("job_id")) return std::string();
  const DynoJson& job = request["job_id"];
  if (job.is_number_unsigned()) {
    uint64_t id = job.get<uint64_t>();
    return id == 0 ? std::string() : absl::StrCat(id);
  }
  if (job.is_string()) {
    std::string id = job.get<std::string>();
    return id == "0" ? std::string() : id;
  }
  return absl::InvalidArgumentError("\"job_id\" must be a non-negative number or a string");
}

absl::StatusOr<TraceArgs> ReadTraceArgs(const DynoJson& request) {
  if (!request.contains("config") || !request["config"].is_string()) {
    return absl::InvalidArgumentError("setKinetOnDemandRequest needs \"config\", a string");
  }
  TraceArgs args;
  args.config = request["config"].get<std::string>();
  absl::StatusOr<std::string> job = ReadJobId(request);
  if (!job.ok()) return job.status();
  args.job_id = *std::move(job);
  const DynoJson pids = request.value("pids", DynoJson::array());
  if (!pids.is_array() || pids.size() > kMaxPids) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"pids\" must be a list of at most ", kMaxPids, " pids"));
  }
  for (const DynoJson& pid : pids) {
    if (!pid.is_number_unsigned() || pid.get<uint64_t>() > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError("\"pids\" must hold pids (whole numbers >= 0)");
    }
    // [0] is how older dyno versions say "every process".
    if (pid.get<uint64_t>() != 0) args.pids.push_back(static_cast<int32_t>(pid.get<uint64_t>()));
  }
  if (request.contains("process_limit")) {
    if (!request["process_limit"].is_number_integer()) {
      return absl::InvalidArgumentError("\"process_limit\" must be a whole number");
    }
    args.process_limit = request["process_limit"].get<int64_t>();
  }
  return args;
}

// Records what StartTrace reports while it runs (the started processes, the
// ones refused at once), then logs how the trace ends.
class DynoTraceObserver : public TraceObserver {
 public:
  void OnEvent(const v1::TraceEvent& event) override {
    if (event.has_started()) {
      trace_id_ = event.started().trace_id();
      for (const v1::ProcessInfo& p : event.started().processes()) started_.push_back(p.pid());
    } else if (event.has_result() && starting_) {
      refused_.push_back(event.result().pid());
      busy_ += event.result().status() == v1::CAPTURE_STATUS_BUSY;
    }
  }
  void OnDone(const absl::Status& status) override {
    LogInfo("dyno RPC trace done", {{"trace_id", trace_id_}, {"status", status.ToString()}});
  }
  void StartReturned() { starting_ = false; }
  std::vector<int32_t> Triggered() const {
    std::vector<int32_t> out;
    for (int32_t pid : started_) {
      if (std::find(refused_.begin(), refused_.end(), pid) == refused_.end()) out.push_back(pid);
    }
    return out;
  }
  int busy() const { return busy_; }

 private:
  bool starting_ = true;
  std::string trace_id_;
  std::vector<int32_t> started_, refused_;
  int busy_ = 0;
};

// The dyno selection as a gpuctl selector: the job's workers, or those the
// pids name (themselves or as ancestors).
absl::StatusOr<v1::ProcessSelector> DynoSelector(DaemonCore* core, const TraceArgs& args) {
  v1::ProcessSelector selector;
  for (int32_t pid : args.pids) selector.add_pids(pid);
  if (!args.job_id.empty()) {
    selector.set_job_id(args.job_id);
    return selector;
  }
  if (!args.pids.empty()) return selector;
  // Job 0 without pids is dynolog's job "0": the processes with no job id.
  absl::StatusOr<v1::ListProcessesResponse> all = core->ListProcesses({});
  if (!all.ok()) return all.status();
  for (const v1::ProcessInfo& p : all->processes()) {
    if (p.role() == v1::PROCESS_ROLE_WORKER && (p.job_id().empty() || p.job_id() == "0")) {
      selector.add_pids(p.pid());
    }
  }
  return selector;
}

std::string StartDynoTrace(DaemonCore* core, const TraceArgs& args, const DynoTraceConfig& config) {
  absl::StatusOr<v1::ProcessSelector> selector = DynoSelector(core, args);
  if (!selector.ok()) return Failed(TraceReply({}, {}, 0), selector.status().message());
  std::vector<int32_t> matched;
  if (selector->pids_size() > 0 || !selector->job_id().empty()) {
    v1::ListProcessesRequest list;
    *list.mutable_selector() = *selector;
    absl::StatusOr<v1::ListProcessesResponse> listed = core->ListProcesses(list);
    if (!listed.ok()) return Failed(TraceReply({}, {}, 0), listed.status().message());
    for (const v1::ProcessInfo& p : listed->processes()) matched.push_back(p.pid());
  }
  if (matched.empty() || args.process_limit <= 0) return TraceReply(matched, {}, 0).dump();

  v1::TraceRequest request = DynoTraceRequest(config);
  *request.mutable_selector() = *selector;
  if (args.process_limit < static_cast<int64_t>(matched.size())) {
    request.mutable_selector()->set_limit(static_cast<uint32_t>(args.process_limit));
  }
  auto observer = std::make_shared<DynoTraceObserver>();
  // On demand, asked for through dynolog's RPC (loopback only, no identity).
  absl::StatusOr<std::string> id =
      core->StartTrace(request, OnDemandTrigger("dynolog RPC (loopback)"), observer);
  observer->StartReturned();
  if (!id.ok()) return Failed(TraceReply(matched, {}, 0), id.status().message());
  DynoJson reply = TraceReply(matched, observer->Triggered(), observer->busy());
  reply["traceId"] = *id;
  if (!config.ignored_keys.empty()) reply["ignoredConfigKeys"] = config.ignored_keys;
  LogInfo("dyno RPC trace started", {{"trace_id", *id},
                                     {"matched", matched.size()},
                                     {"triggered", observer->Triggered().size()},
                                     {"busy", observer->busy()},
                                     {"ignored_keys", absl::StrJoin(config.ignored_keys, ",")}});
  return reply.dump(-1, ' ', false, DynoJson::error_handler_t::replace);
}

}  // namespace

std::string DynoRpcHandler::Handle(absl::string_view body) {
  DynoJson request = DynoJson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded() || !request.is_object()) {
    return Failed(DynoJson::object(), "the request is not a JSON object");
  }
  if (!request.contains("fn") || !request["fn"].is_string()) {
    return Failed(DynoJson::object(), "the request has no \"fn\"");
  }
  const std::string fn = request["fn"].get<std::string>();
  if (fn == "getStatus") return DynoJson{{"status", 1}}.dump();
  if (fn == "getVersion") return DynoJson{{"version", daemon_version_}}.dump();
  if (fn != "setKinetOnDemandRequest") {
    return Failed(DynoJson::object(), absl::StrCat("unknown fn \"", Excerpt(fn), "\""));
  }
  absl::StatusOr<TraceArgs> args = ReadTraceArgs(request);
  if (!args.ok()) return Failed(TraceReply({}, {}, 0), args.status().message());
  absl::StatusOr<DynoTraceConfig> config = ParseDynoConfig(args->config);
  if (!config.ok()) return Failed(TraceReply({}, {}, 0), config.status().message());
  return StartDynoTrace(core_, *args, *config);
}

}  // namespace gpuctl::daemon
