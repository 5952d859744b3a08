#include "daemon/s3/object_body.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::s3 {
namespace {

class MemoryObjectBody final : public ObjectBody {
 public:
  explicit MemoryObjectBody(absl::string_view data) : data_(data) {}
  uint64_t size() const override { return data_.size(); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t len) const override {
    if (offset >= data_.size()) return 0;
    size_t n = std::min<uint64_t>(len, data_.size() - offset);
    std::memcpy(buf, data_.data() + offset, n);
    return n;
  }
  std::string Describe() const override { return "memory buffer"; }

 private:
  absl::string_view data_;
};

class FileObjectBody final : public ObjectBody {
 public:
  FileObjectBody(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~FileObjectBody() override { ::close(fd_); }
  uint64_t size() const override { return size_; }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t len) const override {
    if (offset >= size_) return 0;
    len = std::min<uint64_t>(len, size_ - offset);
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pread(fd_, buf + done, len - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return absl::InternalError(absl::StrCat("reading ", path_, ": ", std::strerror(errno)));
      }
      if (n == 0) {
        return absl::DataLossError(
            absl::StrCat(path_, " shrank below ", size_, " bytes while it was being uploaded"));
      }
      done += static_cast<size_t>(n);
    }
    return done;
  }
  std::string Describe() const override { return absl::StrCat("file ", path_); }

 private:
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

}  // namespace

std::unique_ptr<ObjectBody> MemoryBody(absl::string_view data) {
  return std::make_unique<MemoryObjectBody>(data);
}

absl::StatusOr<std::unique_ptr<ObjectBody>> OpenFileBody(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string msg = absl::StrCat("opening ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
    return absl::InternalError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  return std::unique_ptr<ObjectBody>(
      new FileObjectBody(path, fd, static_cast<uint64_t>(st.st_size)));
}

namespace {

std::string Hex(const unsigned char* digest, unsigned int len) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size_t{2} * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kDigits[digest[i] >> 4]);
    out.push_back(kDigits[digest[i] & 0xf]);
  }
  return out;
}

// Owns an EVP_MD_CTX set up for SHA-256.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) std::abort();
  }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t len) {
    if (EVP_DigestUpdate(ctx_, data, len) != 1) std::abort();
  }
  std::string HexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_, digest, &len) != 1) std::abort();
    return Hex(digest, len);
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  Sha256 sha;
  sha.Update(data.data(), data.size());
  return sha.HexDigest();
}

absl::StatusOr<std::string> Sha256HexOfRange(const ObjectBody& body, uint64_t offset,
                                             uint64_t length) {
  if (offset > body.size() || length > body.size() - offset) {
    return absl::OutOfRangeError(absl::StrCat("range [", offset, ", +", length, ") is outside ",
                                              body.Describe(), " of ", body.size(), " bytes"));
  }
  Sha256 sha;
  std::vector<char> buf(size_t{256} << 10);
  uint64_t done = 0;
  while (done < length) {
    auto n = body.ReadAt(offset + done, buf.data(), std::min<uint64_t>(buf.size(), length - done));
    if (!n.ok()) return n.status();
    if (*n == 0) {
      return absl::DataLossError(absl::StrCat(body.Describe(), " ended early"));
    }
    sha.Update(buf.data(), *n);
    done += *n;
  }
  return sha.HexDigest();
}

}  // namespace gpuctl::s3
