#ifndef GPUCTL_DAEMON_RPC_REFLECTION_V1_SERVICE_H_
#define GPUCTL_DAEMON_RPC_REFLECTION_V1_SERVICE_H_

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpuctl::daemon {

inline constexpr char kReflectionV1ServiceName[] = "grpc.reflection.v1.ServerReflection";

// grpc.reflection.v1.ServerReflection (callback API), which current
// clients (grpcurl) ask for before v1alpha, the only version gRPC 1.51
// serves. Files and symbols come from the process's generated descriptor
// pool, as v1alpha's do; the service list is the one given, which the
// server's wiring knows.
//
// Thread-safe; outlives the grpc::Server it is registered with.
class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  // `services`: the fully-qualified names list_services answers.
  explicit ReflectionV1Service(std::vector<std::string> services)
      : services_(std::move(services)) {}

  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

 private:
  const std::vector<std::string> services_;
};

// The answer to one reflection request. Exposed for tests.
grpc::reflection::v1::ServerReflectionResponse AnswerReflectionRequest(
    const grpc::reflection::v1::ServerReflectionRequest& request,
    const std::vector<std::string>& services);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_REFLECTION_V1_SERVICE_H_
