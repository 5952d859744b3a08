#ifndef GPUCTL_CLI_FAKE_GPUCTL_SERVICE_TEST_UTIL_H_
#define GPUCTL_CLI_FAKE_GPUCTL_SERVICE_TEST_UTIL_H_

// Scripted gpuctlds for CLI tests: real gRPC servers on 127.0.0.1:0, as many
// as a test wants, each with its own script (answering, refusing, slow);
// plus a target nothing listens on and a listener that never answers.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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
#include "absl/time/clock.h"
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
  using ProbeClockFn = std::function<grpc::Status(v1::ProbeClockResponse*)>;
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
  v1::GetScheduleResponse schedule;
  grpc::Status unary_error = grpc::Status::OK;  // returned by the unary calls when set
  // Unset: UNIMPLEMENTED, as from a gpuctld older than ProbeClock. Not
  // counted in calls().
  ProbeClockFn probe_clock;

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
  std::vector<v1::GetScheduleRequest> schedule_requests() {
    absl::MutexLock lock(&mu_);
    return schedule_requests_;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int probes() {
    absl::MutexLock lock(&mu_);
    return probes_;
  }
  // Trace calls whose client cancelled them (seen by a script polling
  // ServerContext::IsCancelled, or by a write that failed).
  void NoteCancelled() {
    absl::MutexLock lock(&mu_);
    ++cancelled_;
  }
  int cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
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

  grpc::Status ProbeClock(grpc::ServerContext*, const v1::ProbeClockRequest*,
                          v1::ProbeClockResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      ++probes_;
    }
    if (!probe_clock) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no script");
    return probe_clock(response);
  }

  grpc::Status GetSchedule(grpc::ServerContext*, const v1::GetScheduleRequest* request,
                           v1::GetScheduleResponse* response) override {
    Record(&schedule_requests_, *request);
    if (!unary_error.ok()) return unary_error;
    *response = schedule;
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
  int cancelled_ ABSL_GUARDED_BY(mu_) = 0;
  int probes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::TraceRequest> trace_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::GetTraceRequest> get_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ListTracesRequest> list_traces_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ListProcessesRequest> list_processes_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::GetScheduleRequest> schedule_requests_ ABSL_GUARDED_BY(mu_);
};

class FakeServer {
 public:
  // "localhost:0" listens on every loopback address localhost names.
  explicit FakeServer(const std::string& address = "127.0.0.1:0") {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
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

// A target where nothing listens: a port that was just free.
inline std::string DeadTarget() {
  FakeServer gone;
  return gone.target();
}

// A TCP listener that never accepts: connections complete in the kernel's
// backlog, and nothing ever answers on them.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API's own idiom.
    auto* any = reinterpret_cast<sockaddr*>(&addr);
    if (fd_ < 0 || bind(fd_, any, len) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, any, &len) != 0) {
      std::abort();
    }
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
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

inline v1::ProcessInfo FakeProcess(int pid, int rank, const std::string& host = "node1") {
  v1::ProcessInfo p;
  p.set_pid(pid);
  p.set_rank(rank);
  p.set_job_id("42");
  p.set_hostname(host);
  return p;
}

inline v1::ProcessResult FakeResult(int pid, int rank, v1::CaptureStatus status,
                                    std::string message = "", const std::string& host = "node1") {
  v1::ProcessResult r;
  r.set_pid(pid);
  r.set_rank(rank);
  r.set_host(host);
  r.set_job_id("42");
  r.set_status(status);
  r.set_message(std::move(message));
  if (status == v1::CAPTURE_STATUS_OK) {
    r.set_event_count(1000 + pid);
    r.set_stored_bytes(12595);
    r.set_file(absl::StrCat(host, "-rank", rank, "-pid", pid, ".json.gz"));
  }
  return r;
}

// A daemon named `host` that selects `processes`, reports each as capturing
// and then `results`, and completes (unless told not to) with `storage`
// (local when unset; the location follows it). The trace id is the
// request's.
inline FakeGpuctlService::TraceFn ScriptedTrace(const std::vector<v1::ProcessInfo>& processes,
                                                const std::vector<v1::ProcessResult>& results,
                                                bool complete = true,
                                                const std::string& host = "node1",
                                                const v1::TraceStorage& storage = {}) {
  return [=](grpc::ServerContext*, const v1::TraceRequest& request,
             grpc::ServerWriter<v1::TraceEvent>* writer) {
    const std::string& id = request.trace_id();
    v1::TraceEvent started;
    started.mutable_started()->set_trace_id(id);
    started.mutable_started()->set_host(host);
    started.mutable_started()->mutable_start_time()->set_seconds(1000);
    started.mutable_started()->mutable_end_time()->set_seconds(1002);
    started.mutable_started()->mutable_received_at()->set_seconds(999);
    if (request.has_caller_time()) {
      v1::ClockOffset* clock = started.mutable_started()->mutable_clock();
      *clock->mutable_caller_time() = request.caller_time();
      clock->mutable_received_at()->set_seconds(999);
      clock->mutable_offset()->set_nanos(120000);
      if (request.has_caller_clock()) {
        *clock->mutable_midpoint_offset() = request.caller_clock().offset();
        *clock->mutable_round_trip() = request.caller_clock().round_trip();
      }
    }
    started.mutable_started()->set_iterations(request.iterations());
    started.mutable_started()->set_start_step(request.start_step());
    for (const auto& p : processes) *started.mutable_started()->add_processes() = p;
    writer->Write(started);
    for (const auto& p : processes) {
      v1::TraceEvent progress;
      progress.mutable_progress()->set_pid(p.pid());
      progress.mutable_progress()->set_phase(v1::PROCESS_PHASE_CAPTURING);
      writer->Write(progress);
    }
    uint32_t ok = 0;
    for (const auto& r : results) {
      v1::TraceEvent event;
      *event.mutable_result() = r;
      writer->Write(event);
      ok += r.status() == v1::CAPTURE_STATUS_OK;
    }
    if (complete) {
      v1::TraceEvent done;
      done.mutable_completed()->set_trace_id(id);
      const std::string local = absl::StrCat("/var/lib/gpuctl/traces/", id);
      done.mutable_completed()->set_location(
          storage.state() == v1::STORAGE_STATE_UPLOADED ? storage.remote_location() : local);
      *done.mutable_completed()->mutable_storage() = storage;
      if (storage.state() == v1::STORAGE_STATE_UNSPECIFIED) {
        done.mutable_completed()->mutable_storage()->set_state(v1::STORAGE_STATE_LOCAL);
        done.mutable_completed()->mutable_storage()->set_local_location(local);
      }
      done.mutable_completed()->set_processes_ok(ok);
      done.mutable_completed()->set_processes_failed(results.size() - ok);
      writer->Write(done);
    }
    return grpc::Status::OK;
  };
}

// Polls `condition` until it holds or `timeout` passes; returns whether it
// held. For fakes that wait on what the client does.
inline bool WaitFor(const std::function<bool()>& condition,
                    absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

}  // namespace gpuctl::cli::testing

#endif  // GPUCTL_CLI_FAKE_GPUCTL_SERVICE_TEST_UTIL_H_
