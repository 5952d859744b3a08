#ifndef GPUCTL_DAEMON_S3_OBJECT_BODY_H_
#define GPUCTL_DAEMON_S3_OBJECT_BODY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::s3 {

// The bytes of an upload, read by offset so that every attempt and every
// part can start where it needs to. Reads may run concurrently.
class ObjectBody {
 public:
  virtual ~ObjectBody() = default;
  virtual uint64_t size() const = 0;
  // Reads up to `len` bytes at `offset`; fewer only at the end of the body.
  virtual absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t len) const = 0;
  // For error messages: "file /path" or "memory buffer".
  virtual std::string Describe() const = 0;
};

// Borrows `data`, which must outlive the body.
std::unique_ptr<ObjectBody> MemoryBody(absl::string_view data);

// A regular file, opened now; its size is taken now too, and a read that
// finds the file shorter fails with DATA_LOSS.
absl::StatusOr<std::unique_ptr<ObjectBody>> OpenFileBody(const std::string& path);

// Lowercase hex SHA-256 (OpenSSL EVP).
std::string Sha256Hex(absl::string_view data);
// SHA-256 of body[offset, offset + length), streamed through a small buffer.
absl::StatusOr<std::string> Sha256HexOfRange(const ObjectBody& body, uint64_t offset,
                                             uint64_t length);

// The SHA-256 of no bytes.
inline constexpr absl::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_OBJECT_BODY_H_
