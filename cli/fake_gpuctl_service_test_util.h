#ifndef GPUCTL_CLI_FAKE_GPUCTL_SERVICE_TEST_UTIL_H_
#define GPUCTL_CLI_FAKE_GPUCTL_SERVICE_TEST_UTIL_H_

// A scripted gpuctld for CLI tests: a real gRPC server on 127.0.0.1:0.

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cli/command_env.h"
#include "cli/interrupt.h"
#include "gpuctl/v1/service.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace gpuctl::cli::testing {

class FakeGpuctlService final : public v1::Gpuctl::Service {
 public:
  using TraceFn = std::function<grpc::Status(grpc::ServerContext*, const v1::TraceRequest&,
                                             grpc::ServerWriter<v1::TraceEvent>*)>;
  using GetTraceFn =
      std::function<grpc::Status(const v1::GetTraceRequest&, grpc::ServerWriter<v1::TraceChunk>*)>;

  // Scripts; set before the first call.
  TraceFn trace;
  GetTraceFn get_trace;                                             // default: serves `files`
  std::map<std::string, std::map<std::string, std::string>> files;  // trace id -> name -> bytes
  size_t chunk_size = 7;
  v1::ListProcessesResponse processes;
  std::map<std::string, v1::ListTracesResponse> trace_pages;  // by page token
  v1::GetStatusResponse status;
  grpc::Status unary_error = grpc::Status::OK;  // returned by the unary calls when set

  std::vector<v1::TraceRequest> trace_requests() {
    absl::MutexLock lock(&mu_);
    return trace_requests_;
  }
  std::vector<v1::GetTraceRequest> get_requests() {
    absl::MutexLock lock(&mu_);
    return get_requests_;
  }
  std::vector<v1::ListTracesRequest> list_traces_requests() {
    absl::MutexLock lock(&mu_);
    return list_traces_requests_;
  }
  std::vector<v1::ListProcessesRequest> list_processes_requests() {
    absl::MutexLock lock(&mu_);
    return list_processes_requests_;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

  grpc::Status Trace(grpc::ServerContext* context, const v1::TraceRequest* request,
                     grpc::ServerWriter<v1::TraceEvent>* writer) override {
    Record(&trace_requests_, *request);
    if (!trace) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no script");
    return trace(context, *request, writer);
  }

  grpc::Status GetTrace(grpc::ServerContext*, const v1::GetTraceRequest* request,
                        grpc::ServerWriter<v1::TraceChunk>* writer) override {
    Record(&get_requests_, *request);
    if (get_trace) return get_trace(*request, writer);
    auto it = files.find(request->trace_id());
    if (it == files.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no trace ", request->trace_id()));
    }
    for (const auto& [name, data] : it->second) {
      if (request->files_size() > 0 && std::find(request->files().begin(), request->files().end(),
                                                 name) == request->files().end()) {
        continue;
      }
      size_t offset = 0;
      do {
        v1::TraceChunk chunk;
        chunk.set_file(name);
        chunk.set_offset(offset);
        chunk.set_file_size(data.size());
        chunk.set_data(data.substr(offset, chunk_size));
        offset += chunk.data().size();
        if (!writer->Write(chunk)) return grpc::Status::CANCELLED;
      } while (offset < data.size());
    }
    return grpc::Status::OK;
  }

  grpc::Status ListProcesses(grpc::ServerContext*, const v1::ListProcessesRequest* request,
                             v1::ListProcessesResponse* response) override {
    Record(&list_processes_requests_, *request);
    if (!unary_error.ok()) return unary_error;
    *response = processes;
    return grpc::Status::OK;
  }

  grpc::Status ListTraces(grpc::ServerContext*, const v1::ListTracesRequest* request,
                          v1::ListTracesResponse* response) override {
    Record(&list_traces_requests_, *request);
    if (!unary_error.ok()) return unary_error;
    auto it = trace_pages.find(request->page_token());
    if (it == trace_pages.end()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad page token");
    }
    *response = it->second;
    return grpc::Status::OK;
  }

  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                         v1::GetStatusResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      ++calls_;
    }
    if (!unary_error.ok()) return unary_error;
    *response = status;
    return grpc::Status::OK;
  }

 private:
  template <typename T>
  void Record(std::vector<T>* list, const T& request) {
    absl::MutexLock lock(&mu_);
    ++calls_;
    list->push_back(request);
  }

  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::TraceRequest> trace_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::GetTraceRequest> get_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ListTracesRequest> list_traces_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ListProcessesRequest> list_processes_requests_ ABSL_GUARDED_BY(mu_);
};

class FakeServer {
 public:
  FakeServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() { server_->Shutdown(); }

  FakeGpuctlService& service() { return service_; }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }
  int port() const { return port_; }

 private:
  FakeGpuctlService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// An interrupt the test fires by hand.
class ManualInterrupts final : public InterruptSource {
 public:
  void SetHandler(std::function<void()> handler) override {
    absl::MutexLock lock(&mu_);
    handler_ = std::move(handler);
  }
  // Runs the armed handler on the calling thread; false when none is armed.
  bool Fire() {
    absl::MutexLock lock(&mu_);
    if (!handler_) return false;
    handler_();
    return true;
  }

 private:
  absl::Mutex mu_;
  std::function<void()> handler_ ABSL_GUARDED_BY(mu_);
};

// Captures a command's output.
struct TestConsole {
  std::ostringstream out;
  std::ostringstream err;
  CliEnv env() {
    CliEnv e;
    e.out = &out;
    e.err = &err;
    e.connect_timeout = absl::Seconds(5);
    e.trace_margin = absl::Seconds(30);
    return e;
  }
};

}  // namespace gpuctl::cli::testing

#endif  // GPUCTL_CLI_FAKE_GPUCTL_SERVICE_TEST_UTIL_H_
