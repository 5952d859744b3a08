#include "daemon/analysis/trace_input.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpuctl::analysis {
namespace {

constexpr size_t kRawBufferBytes = size_t{256} << 10;

}  // namespace

struct TraceInput::State {
  // Raw bytes: a file descriptor, or a caller's buffer.
  int fd = -1;
  absl::string_view memory;
  size_t memory_pos = 0;
  uint64_t raw_read = 0;  // raw bytes taken from the file or buffer
  bool raw_eof = false;

  bool gzip = false;
  bool sniffed = false;
  bool in_member = false;  // inside a gzip member (its header seen)
  uint64_t member_start = 0;
  bool inflate_ready = false;
  z_stream z{};
  // The member's check values, computed here: zlib's own CRC-32 is a tenth
  // of the speed of libdeflate's and a large share of reading a trace, so
  // zlib is told not to validate (inflateValidate) and the trailer's CRC-32
  // and size are compared here. `trailer` keeps the last 8 bytes inflate
  // consumed, which at a member's end are its trailer.
  uint32_t member_crc = 0;
  uint64_t member_size = 0;
  unsigned char trailer[8] = {};
  std::unique_ptr<char[]> in;  // raw bytes not yet inflated (gzip) or sniffed
  size_t in_pos = 0, in_len = 0;
  absl::Status status;
  uint64_t bytes_read = 0;  // decompressed bytes returned by Read()

  ~State() {
    if (inflate_ready) inflateEnd(&z);
    if (fd >= 0) close(fd);
  }

  size_t ReadRaw(char* out, size_t cap) {
    if (raw_eof || !status.ok()) return 0;
    if (fd < 0) {
      size_t n = std::min(cap, memory.size() - memory_pos);
      std::memcpy(out, memory.data() + memory_pos, n);
      memory_pos += n;
      raw_read += n;
      raw_eof = n == 0;
      return n;
    }
    while (true) {
      ssize_t n = read(fd, out, cap);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = absl::InvalidArgumentError(
            absl::StrCat("read error at byte ", raw_read, ": ", std::strerror(errno)));
        return 0;
      }
      raw_read += static_cast<uint64_t>(n);
      raw_eof = n == 0;
      return static_cast<size_t>(n);
    }
  }

  // Fills `in` when it is empty; false at the end of the raw input.
  bool FillIn() {
    if (in_pos < in_len) return true;
    in_pos = 0;
    in_len = ReadRaw(in.get(), kRawBufferBytes);
    return in_len > 0;
  }

  void Sniff() {
    sniffed = true;
    in.reset(new char[kRawBufferBytes]);  // not zeroed: only what is read is used
    // Two bytes decide; a first read shorter than that is topped up.
    while (in_len < 2 && !raw_eof && status.ok()) {
      in_len += ReadRaw(in.get() + in_len, kRawBufferBytes - in_len);
    }
    gzip = in_len >= 2 && static_cast<unsigned char>(in[0]) == 0x1f &&
           static_cast<unsigned char>(in[1]) == 0x8b;
    if (gzip) {
      // 15 + 16: a gzip wrapper, the largest window.
      inflate_ready = inflateInit2(&z, 15 + 16) == Z_OK && inflateValidate(&z, 0) == Z_OK;
      if (!inflate_ready) status = absl::InternalError("zlib's inflateInit2 failed");
    }
  }

  uint64_t CompressedOffset() const { return raw_read - (in_len - in_pos); }

  size_t ReadPlain(char* out, size_t cap) {
    if (in_pos < in_len) {
      size_t n = std::min(cap, in_len - in_pos);
      std::memcpy(out, in.get() + in_pos, n);
      in_pos += n;
      return n;
    }
    return ReadRaw(out, cap);
  }

  void KeepTrailer(const unsigned char* consumed, size_t n) {
    if (n >= sizeof(trailer)) {
      std::memcpy(trailer, consumed + n - sizeof(trailer), sizeof(trailer));
      return;
    }
    std::memmove(trailer, trailer + n, sizeof(trailer) - n);
    std::memcpy(trailer + sizeof(trailer) - n, consumed, n);
  }

  // The ended member's trailer against what was inflated (RFC 1952: CRC-32,
  // then the size mod 2^32, both little-endian).
  void CheckMember() {
    auto le32 = [this](size_t at) {
      return static_cast<uint32_t>(trailer[at]) | static_cast<uint32_t>(trailer[at + 1]) << 8 |
             static_cast<uint32_t>(trailer[at + 2]) << 16 |
             static_cast<uint32_t>(trailer[at + 3]) << 24;
    };
    const char* wrong = le32(0) != member_crc ? "incorrect data check"
                        : le32(4) != static_cast<uint32_t>(member_size & 0xffffffffU)
                            ? "incorrect length check"
                            : nullptr;
    if (wrong != nullptr && status.ok()) {
      status = absl::InvalidArgumentError(
          absl::StrCat("corrupt gzip data in the member starting at byte ", member_start,
                       " (read to byte ", CompressedOffset(), "): ", wrong));
    }
    member_crc = 0;
    member_size = 0;
  }

  size_t ReadGzip(char* out, size_t cap) {
    z.next_out = reinterpret_cast<Bytef*>(out);  // NOLINT: zlib's unsigned bytes
    z.avail_out = static_cast<uInt>(cap);
    while (z.avail_out == cap && status.ok()) {
      if (!FillIn()) {
        if (in_member && status.ok()) {
          status = absl::InvalidArgumentError(absl::StrCat(
              "truncated gzip data: the file ends inside a member at byte ", raw_read));
        }
        break;
      }
      z.next_in = reinterpret_cast<Bytef*>(in.get() + in_pos);  // NOLINT: zlib's unsigned bytes
      z.avail_in = static_cast<uInt>(in_len - in_pos);
      if (!in_member) member_start = CompressedOffset();
      in_member = true;
      const Bytef* out_before = z.next_out;
      const size_t in_before = in_pos;
      int rc = inflate(&z, Z_NO_FLUSH);
      in_pos = in_len - z.avail_in;
      const auto produced = static_cast<size_t>(z.next_out - out_before);
      member_crc = libdeflate_crc32(member_crc, out_before, produced);
      member_size += produced;
      KeepTrailer(reinterpret_cast<const unsigned char*>(in.get()) + in_before,  // NOLINT
                  in_pos - in_before);
      if (rc == Z_STREAM_END) {
        // One member done; RFC 1952 lets another follow.
        in_member = false;
        CheckMember();
        inflateReset(&z);
        inflateValidate(&z, 0);
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        status = absl::InvalidArgumentError(absl::StrCat(
            "corrupt gzip data in the member starting at byte ", member_start, " (read to byte ",
            CompressedOffset(), "): ", z.msg != nullptr ? z.msg : absl::StrCat("zlib error ", rc)));
      }
    }
    return cap - z.avail_out;
  }
};

TraceInput::TraceInput(std::unique_ptr<State> state) : state_(std::move(state)) {}
TraceInput::TraceInput(TraceInput&&) noexcept = default;
TraceInput& TraceInput::operator=(TraceInput&&) noexcept = default;
TraceInput::~TraceInput() = default;

absl::StatusOr<TraceInput> TraceInput::OpenFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string message = absl::StrCat(path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    return absl::InvalidArgumentError(message);
  }
  auto state = std::make_unique<State>();
  state->fd = fd;
  return TraceInput(std::move(state));
}

TraceInput TraceInput::FromBytes(absl::string_view bytes) {
  auto state = std::make_unique<State>();
  state->memory = bytes;
  return TraceInput(std::move(state));
}

size_t TraceInput::Read(char* out, size_t cap) {
  State& s = *state_;
  if (cap == 0 || !s.status.ok()) return 0;
  if (!s.sniffed) s.Sniff();
  if (!s.status.ok()) return 0;
  const size_t n = s.gzip ? s.ReadGzip(out, cap) : s.ReadPlain(out, cap);
  s.bytes_read += n;
  return n;
}

const absl::Status& TraceInput::status() const { return state_->status; }
bool TraceInput::gzip() const { return state_->gzip; }
uint64_t TraceInput::bytes_read() const { return state_->bytes_read; }

}  // namespace gpuctl::analysis
