#include "cli/trace_download.h"

#include "absl/status/status.h"
#include "cli/bounded_parallel.h"
#include "cli/connection.h"
#include "gpuctl/v1/service.grpc.pb.h"

namespace gpuctl::cli {

std::vector<std::optional<DownloadPlan>> PlanDownloads(const std::vector<HostTrace>& hosts) {
  std::vector<HostFiles> files;
  files.reserve(hosts.size());
  for (const HostTrace& h : hosts) {
    HostFiles& f = files.emplace_back();
    f.name = h.name();
    f.target = h.target;
    for (const auto& [pid, result] : h.results) f.files.push_back(result.file());
  }
  return PlanDownloads(files);
}

std::vector<HostDownload> DownloadFleetTrace(const std::vector<HostTrace>& hosts,
                                             const FleetDownloadOptions& options,
                                             CancelGroup& cancel) {
  std::vector<std::optional<DownloadPlan>> plans = PlanDownloads(hosts);
  std::vector<size_t> planned;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i]) planned.push_back(i);
  }
  std::vector<HostDownload> downloads(hosts.size());
  RunBounded(planned.size(), options.parallel, [&](size_t n) {
    const size_t i = planned[n];
    const DownloadPlan& plan = *plans[i];
    HostDownload& download = downloads[i];
    download.attempted = true;
    download.local_names = plan.local_names;
    DownloadProgress* const progress = options.progress;
    if (progress != nullptr) {
      uint64_t bytes = 0;
      size_t files = 0;
      for (const auto& [pid, result] : hosts[i].results) {
        if (result.file().empty()) continue;
        ++files;
        bytes += result.stored_bytes();
      }
      progress->Begin(i, plan.files.empty() ? files : plan.files.size(), bytes);
    }
    // Every return below says how the host's download ended.
    struct Ender {
      DownloadProgress* progress;
      size_t host;
      const absl::Status& status;
      ~Ender() {
        if (progress != nullptr) progress->Done(host, status);
      }
    } ender{progress, i, download.status};
    if (!plan.error.empty()) {
      download.status = absl::FailedPreconditionError(plan.error);
      return;
    }
    if (cancel.cancelled()) {
      download.status = absl::CancelledError("download interrupted");
      return;
    }
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        Connect(hosts[i].target, options.connect_timeout, cancel.flag(), options.security);
    if (!channel.ok()) {
      download.status = channel.status();
      return;
    }
    std::unique_ptr<v1::Gpuctl::Stub> stub = v1::Gpuctl::NewStub(*channel);
    DownloadOptions request;
    request.trace_id = options.trace_id;
    request.files = plan.files;
    request.local_names = plan.local_names;
    request.output_root = options.output_root;
    request.timeout = options.transfer_timeout;
    request.cancel = &cancel;
    if (progress != nullptr) {
      request.on_progress = [progress, i](size_t files_done, uint64_t bytes_done) {
        progress->Update(i, files_done, bytes_done);
      };
    }
    absl::StatusOr<DownloadResult> result = DownloadTrace(*stub, request);
    if (result.ok()) {
      download.files = std::move(result->files);
    } else {
      download.status = result.status();
    }
  });
  return downloads;
}

}  // namespace gpuctl::cli
