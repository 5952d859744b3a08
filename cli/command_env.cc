#include "cli/command_env.h"

#include "cli/connection.h"

namespace gpuctl::cli {

absl::StatusOr<std::unique_ptr<v1::Gpuctl::Stub>> OpenStub(const std::string& target,
                                                           const CliEnv& env) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      Connect(target, env.connect_timeout, nullptr, env.security);
  if (!channel.ok()) return channel.status();
  return v1::Gpuctl::NewStub(*channel);
}

}  // namespace gpuctl::cli
