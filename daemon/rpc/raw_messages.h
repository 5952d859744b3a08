#ifndef GPUCTL_DAEMON_RPC_RAW_MESSAGES_H_
#define GPUCTL_DAEMON_RPC_RAW_MESSAGES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace gpuctl::daemon {

// The service's methods take and give bytes (raw callback methods), so that
// a request that does not parse gets an answer that says so: gRPC's typed
// handlers reject it before any code of the daemon runs, with UNIMPLEMENTED
// and no message.

// Parses the bytes of a `method` request into `request`. INVALID_ARGUMENT
// naming the method, the request type and what is wrong otherwise:
//   "GetTrace request: not a valid gpuctl.v1.GetTraceRequest (field
//    trace_id is not valid UTF-8)".
absl::Status ParseRequest(absl::string_view method, const grpc::ByteBuffer& bytes,
                          google::protobuf::Message* request);

// `message` as the bytes of a reply.
grpc::ByteBuffer SerializeReply(const google::protobuf::Message& message);

// Why `bytes` do not parse as a `type`: the wire format itself, or the
// first string field (at any depth) that is not UTF-8. Empty when neither
// explains it. Exposed for tests.
std::string DescribeParseFailure(const google::protobuf::Descriptor& type, absl::string_view bytes);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_RPC_RAW_MESSAGES_H_
