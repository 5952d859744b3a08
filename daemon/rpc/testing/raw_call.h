#ifndef GPUCTL_DAEMON_RPC_TESTING_RAW_CALL_H_
#define GPUCTL_DAEMON_RPC_TESTING_RAW_CALL_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace gpuctl::daemon::testing {

// Calls `method` ("/gpuctl.v1.Gpuctl/GetTrace") with `request` as the
// request's bytes, whatever they are, through a generic stub: the call's
// status, and every reply's bytes in `replies` when given. Each step waits
// at most 30 s; a step that does not complete gives DEADLINE_EXCEEDED.
inline grpc::Status RawCall(const std::shared_ptr<grpc::Channel>& channel,
                            const std::string& method, const std::string& request,
                            std::vector<std::string>* replies = nullptr) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(30);
  context.set_deadline(deadline);
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &cq);
  // Starts one step and waits for it: whether it succeeded. Steps run one
  // at a time, so a step's own address on the stack tells it apart.
  auto step = [&](auto start) {
    int marker = 0;
    void* const want = &marker;
    start(want);
    void* tag = nullptr;
    bool ok = false;
    return cq.AsyncNext(&tag, &ok, deadline) == grpc::CompletionQueue::GOT_EVENT && tag == want &&
           ok;
  };
  grpc::Status status(grpc::StatusCode::DEADLINE_EXCEEDED, "the call did not complete");
  if (step([&](void* tag) { call->StartCall(tag); })) {
    grpc::Slice slice(request);
    const grpc::ByteBuffer bytes(&slice, 1);
    if (step([&](void* tag) { call->Write(bytes, tag); })) {
      step([&](void* tag) { call->WritesDone(tag); });
    }
    grpc::ByteBuffer reply;
    while (step([&](void* tag) { call->Read(&reply, tag); })) {
      std::vector<grpc::Slice> slices;
      std::string data;
      if (reply.Dump(&slices).ok()) {
        for (const grpc::Slice& s : slices) data.append(s.begin(), s.end());
      }
      if (replies != nullptr) replies->push_back(std::move(data));
    }
    step([&](void* tag) { call->Finish(&status, tag); });
  }
  context.TryCancel();
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

}  // namespace gpuctl::daemon::testing

#endif  // GPUCTL_DAEMON_RPC_TESTING_RAW_CALL_H_
