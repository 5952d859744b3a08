#include "cli/process_listing.h"

#include "absl/time/clock.h"
#include "cli/bounded_parallel.h"
#include "cli/connection.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace gpuctl::cli {

// Unary calls are short: a blocking call on each of at most `parallel`
// threads is the simplest way to bound them.
std::vector<HostProcesses> ListProcessesOnHosts(const std::vector<HostEntry>& hosts,
                                                const v1::ProcessSelector& selector,
                                                size_t parallel, absl::Duration timeout,
                                                CancelGroup& cancel, bool include_rejected,
                                                const ChannelSecurity& security) {
  std::vector<HostProcesses> answers(hosts.size());
  RunBounded(hosts.size(), parallel, [&](size_t i) {
    HostProcesses& answer = answers[i];
    answer.target = hosts[i].target;
    auto fail = [&](const absl::Status& status) {
      HostFailure failure = ClassifyFailure(status, answer.target);
      answer.status = failure.status;
      answer.error = std::move(failure.error);
    };
    if (cancel.cancelled()) return fail(absl::CancelledError("cancelled"));
    if (!hosts[i].error.empty()) {
      answer.status = HostStatus::kUnreachable;
      answer.error = hosts[i].error;
      return;
    }
    const absl::Time deadline = absl::Now() + timeout;
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        Connect(answer.target, timeout, cancel.flag(), security);
    if (!channel.ok()) return fail(channel.status());
    v1::ListProcessesRequest request;
    *request.mutable_selector() = selector;
    request.set_include_rejected(include_rejected);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    grpc::Status status;
    {
      CancelGroup::Scope scope(&cancel, &context);
      status = v1::Gpuctl::NewStub(*channel)->ListProcesses(&context, request, &answer.response);
    }
    if (cancel.cancelled() && !status.ok()) return fail(absl::CancelledError("cancelled"));
    if (!status.ok()) fail(FromRpcStatus(status));
  });
  return answers;
}

}  // namespace gpuctl::cli
