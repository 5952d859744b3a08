#include "daemon/analysis/report_host_context.h"

#include <utility>
#include <vector>

namespace gpuctl::analysis {
namespace {

using Json = nlohmann::json;

Json NamedTimes(const std::vector<NamedTime>& named) {
  Json out = Json::array();
  for (const NamedTime& n : named) {
    out.push_back(Json{{"name", n.name}, {"ns", n.ns}, {"count", n.count}});
  }
  return out;
}

Json Attribution(const CpuAttribution& a) {
  return Json{{"total_ns", a.total_ns},
              {"on_cpu_ns", a.on_cpu_ns},
              {"blocked_ns", a.blocked_ns},
              {"preempted_ns", a.preempted_ns},
              {"unknown_ns", a.unknown_ns},
              {"samples", a.samples},
              {"blocked_in", NamedTimes(a.blocked_in)},
              {"preempted_by", NamedTimes(a.preempted_by)},
              {"on_cpu", NamedTimes(a.on_cpu)}};
}

}  // namespace

Json HostContextJson(const HostContext& host) {
  if (!host.present) return Json(nullptr);
  Json threads = Json::array();
  for (const ThreadActivity& t : host.threads) {
    Json thread = Attribution(t.time);
    thread["pid"] = t.pid;
    thread["tid"] = t.tid;
    thread["name"] = t.name;
    threads.push_back(std::move(thread));
  }
  Json helpers = Attribution(host.helpers);
  helpers["threads"] = host.helper_threads;
  return Json{{"samples", host.samples},
              {"off_cpu_slices", host.off_cpu_slices},
              {"threads", std::move(threads)},
              {"host_bound", Json{{"gaps", host.gaps},
                                  {"launching", Attribution(host.launching)},
                                  {"helpers", std::move(helpers)}}}};
}

}  // namespace gpuctl::analysis
