// libFuzzer entry point for the kineto datagram decoder: any bytes decode
// or are refused with a message, and whatever decodes re-encodes to the
// same bytes (the decoder accepts exactly the layout libkineto sends).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <variant>

#include "daemon/kineto/kineto_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace kineto = gpuctl::daemon::kineto;
  auto decoded = kineto::DecodeDatagram({data, size});
  if (!decoded.ok()) {
    if (decoded.status().message().empty()) std::abort();
    return 0;
  }
  std::string encoded;
  if (const auto* request = std::get_if<kineto::KinetoRequest>(&*decoded)) {
    if (request->pids.empty() || request->pids.size() > kineto::kMaxRequestPids) std::abort();
    for (int32_t pid : request->pids) {
      if (pid <= 0) std::abort();
    }
    encoded = kineto::EncodeRequest(*request);
  } else {
    encoded = kineto::EncodeContext(std::get<kineto::KinetoContext>(*decoded));
  }
  // Bytes after the type's NUL are not kept; everything else round-trips.
  const std::string original(reinterpret_cast<const char*>(data), size);  // NOLINT
  if (encoded.size() != size || encoded.substr(0, 8) != original.substr(0, 8) ||
      encoded.substr(kineto::kMetadataBytes) != original.substr(kineto::kMetadataBytes)) {
    std::abort();
  }
  return 0;
}
