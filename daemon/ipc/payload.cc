#include "daemon/ipc/payload.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpuctl::daemon {
namespace {

class MappedPayload final : public Payload {
 public:
  MappedPayload(void* addr, size_t size) : addr_(addr), size_(size) {}
  ~MappedPayload() override {
    if (addr_ != nullptr) munmap(addr_, size_);
  }
  MappedPayload(const MappedPayload&) = delete;
  MappedPayload& operator=(const MappedPayload&) = delete;
  absl::Span<const uint8_t> bytes() const override {
    return absl::Span<const uint8_t>(static_cast<const uint8_t*>(addr_), size_);
  }

 private:
  void* addr_;
  size_t size_;
};

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

}  // namespace

absl::StatusOr<std::unique_ptr<Payload>> MapSealedMemfd(int fd, uint64_t expected_size,
                                                        uint64_t max_size) {
  FdCloser closer(fd);
  if (expected_size > max_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload of ", expected_size, " bytes exceeds the limit of ", max_size));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("fstat on payload fd: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError("payload fd is not a regular file (memfd expected)");
  }
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload fd does not support seals (memfd expected): ", std::strerror(errno)));
  }
  if ((seals & kRequiredSeals) != kRequiredSeals) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload memfd is not sealed against shrink, grow and write (seals=0x",
                     absl::Hex(seals), ")"));
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) != expected_size) {
    return absl::InvalidArgumentError(absl::StrCat("payload memfd holds ", st.st_size,
                                                   " bytes, result announced ", expected_size));
  }
  if (expected_size == 0) return std::make_unique<MappedPayload>(nullptr, 0);
  void* addr = mmap(nullptr, expected_size, PROT_READ, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    return absl::InvalidArgumentError(
        absl::StrCat("mmap of payload memfd: ", std::strerror(errno)));
  }
  return std::make_unique<MappedPayload>(addr, expected_size);
}

}  // namespace gpuctl::daemon
