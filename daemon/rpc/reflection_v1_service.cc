#include "daemon/rpc/reflection_v1_service.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace gpuctl::daemon {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

void SetError(grpc::StatusCode code, absl::string_view message,
              ServerReflectionResponse* response) {
  response->mutable_error_response()->set_error_code(static_cast<int32_t>(code));
  response->mutable_error_response()->set_error_message(ClampMessage(message));
}

// `file` and every file it imports, transitively, each once.
void AddFile(const FileDescriptor& file, std::set<std::string>* sent,
             ServerReflectionResponse* response) {
  if (!sent->insert(file.name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file.CopyTo(&proto);
  proto.SerializeToString(
      response->mutable_file_descriptor_response()->add_file_descriptor_proto());
  for (int i = 0; i < file.dependency_count(); ++i) AddFile(*file.dependency(i), sent, response);
}

void AnswerFile(const FileDescriptor* file, absl::string_view what, absl::string_view name,
                ServerReflectionResponse* response) {
  if (file == nullptr) {
    SetError(grpc::StatusCode::NOT_FOUND, absl::StrCat(what, " ", Excerpt(name), " not found"),
             response);
    return;
  }
  std::set<std::string> sent;
  AddFile(*file, &sent, response);
}

// One stream: a request read, its answer written, the next one read.
class ReflectionStream final
    : public grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse> {
 public:
  explicit ReflectionStream(const std::vector<std::string>* services) : services_(services) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    response_ = AnswerReflectionRequest(request_, *services_);
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed by the client"));
      return;
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  const std::vector<std::string>* const services_;
  ServerReflectionRequest request_;
  ServerReflectionResponse response_;
};

}  // namespace

ServerReflectionResponse AnswerReflectionRequest(const ServerReflectionRequest& request,
                                                 const std::vector<std::string>& services) {
  const DescriptorPool& pool = *DescriptorPool::generated_pool();
  ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case ServerReflectionRequest::kListServices:
      for (const std::string& name : services) {
        response.mutable_list_services_response()->add_service()->set_name(name);
      }
      break;
    case ServerReflectionRequest::kFileByFilename:
      AnswerFile(pool.FindFileByName(request.file_by_filename()), "file",
                 request.file_by_filename(), &response);
      break;
    case ServerReflectionRequest::kFileContainingSymbol:
      AnswerFile(pool.FindFileContainingSymbol(request.file_containing_symbol()), "symbol",
                 request.file_containing_symbol(), &response);
      break;
    case ServerReflectionRequest::kFileContainingExtension: {
      const auto& wanted = request.file_containing_extension();
      const auto* type = pool.FindMessageTypeByName(wanted.containing_type());
      const auto* extension =
          type == nullptr ? nullptr : pool.FindExtensionByNumber(type, wanted.extension_number());
      AnswerFile(extension == nullptr ? nullptr : extension->file(), "extension",
                 absl::StrCat(wanted.containing_type(), " ", wanted.extension_number()), &response);
      break;
    }
    case ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const auto* type = pool.FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        SetError(
            grpc::StatusCode::NOT_FOUND,
            absl::StrCat("type ", Excerpt(request.all_extension_numbers_of_type()), " not found"),
            &response);
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool.FindAllExtensions(type, &extensions);
      auto* numbers = response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const auto* extension : extensions) numbers->add_extension_number(extension->number());
      break;
    }
    case ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      SetError(grpc::StatusCode::INVALID_ARGUMENT, "the request asks for nothing", &response);
      break;
  }
  return response;
}

grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse>*
ReflectionV1Service::ServerReflectionInfo(grpc::CallbackServerContext* /*context*/) {
  return new ReflectionStream(&services_);
}

}  // namespace gpuctl::daemon
