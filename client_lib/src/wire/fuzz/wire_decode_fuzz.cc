// libFuzzer target for the IPC codec: both decoders on arbitrary bytes, and
// for every accepted input the round trip decode -> encode -> decode must
// give the same message, with the re-encoding canonical (encoding it again
// yields the same bytes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "client_lib/src/wire/ipc_messages.h"

namespace {

template <typename Message>
void CheckRoundTrip(const std::string& input) {
  Message decoded;
  if (!gpuctl::wire::Decode(input, &decoded)) {
    if (!std::holds_alternative<std::monostate>(decoded)) {
      std::abort();
    }
    return;
  }
  std::string encoded;
  gpuctl::wire::Encode(decoded, &encoded);
  Message again;
  if (!gpuctl::wire::Decode(encoded, &again) || !(again == decoded)) {
    std::abort();
  }
  std::string reencoded;
  gpuctl::wire::Encode(again, &reencoded);
  if (reencoded != encoded) {
    std::abort();
  }
  // Encode appends; it never touches what is already there.
  std::string appended = "prefix";
  gpuctl::wire::Encode(decoded, &appended);
  if (appended != "prefix" + encoded) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(data, data + size);
  CheckRoundTrip<gpuctl::wire::ClientMessage>(input);
  CheckRoundTrip<gpuctl::wire::DaemonMessage>(input);
  return 0;
}
