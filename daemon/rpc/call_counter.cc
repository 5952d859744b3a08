#include "daemon/rpc/call_counter.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"

namespace gpuctl::daemon {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

class CallCounterInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallCounterInterceptor(const char* method, const CallDone* done)
      : method_(method == nullptr ? "" : method), done_(done) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      (*done_)(method_, static_cast<absl::StatusCode>(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  const CallDone* const done_;
};

class CallCounterFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallCounterFactory(CallDone done) : done_(std::move(done)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CallCounterInterceptor(info->method(), &done_);
  }

 private:
  const CallDone done_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeCallCounter(
    CallDone done) {
  return std::make_unique<CallCounterFactory>(std::move(done));
}

std::vector<std::string> ServedMethods(const std::vector<std::string>& services) {
  std::vector<std::string> out;
  const google::protobuf::DescriptorPool* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const std::string& name : services) {
    const google::protobuf::ServiceDescriptor* service = pool->FindServiceByName(name);
    if (service == nullptr) continue;
    for (int i = 0; i < service->method_count(); ++i) {
      out.push_back(absl::StrCat("/", name, "/", service->method(i)->name()));
    }
  }
  return out;
}

}  // namespace gpuctl::daemon
