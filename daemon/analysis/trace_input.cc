#include "daemon/analysis/trace_input.h"

#include <fcntl.h>
#include <isa-l/igzip_lib.h>
#include <unistd.h>

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
  // ISA-L's inflate (igzip): three times zlib's speed on trace JSON, the
  // member's CRC-32 and size included. It checks the trailer itself; the
  // last 8 bytes it consumed are kept in `trailer` only to say which of the
  // two values was wrong. About 100 KiB, hence on the heap with State.
  inflate_state isal{};
  unsigned char trailer[8] = {};
  std::unique_ptr<char[]> in;  // raw bytes not yet inflated (gzip) or sniffed
  size_t in_pos = 0, in_len = 0;
  absl::Status status;
  uint64_t bytes_read = 0;  // decompressed bytes returned by Read()

  ~State() {
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
    if (gzip) StartMember();
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

  void StartMember() {
    isal_inflate_init(&isal);
    isal.crc_flag = ISAL_GZIP;  // RFC 1952: header, DEFLATE, CRC-32 and size
  }

  // Which trailer value ISA-L found wrong (RFC 1952: CRC-32, then the size
  // mod 2^32, both little-endian).
  const char* WrongCheck() const {
    auto le32 = [this](size_t at) {
      return static_cast<uint32_t>(trailer[at]) | static_cast<uint32_t>(trailer[at + 1]) << 8 |
             static_cast<uint32_t>(trailer[at + 2]) << 16 |
             static_cast<uint32_t>(trailer[at + 3]) << 24;
    };
    return le32(0) != isal.crc ? "incorrect data check" : "incorrect length check";
  }

  static const char* IsalError(int rc) {
    switch (rc) {
      case ISAL_INVALID_BLOCK:
        return "invalid block";
      case ISAL_INVALID_SYMBOL:
        return "invalid code";
      case ISAL_INVALID_LOOKBACK:
        return "invalid distance too far back";
      case ISAL_INVALID_WRAPPER:
        return "incorrect header check";
      case ISAL_UNSUPPORTED_METHOD:
        return "unknown compression method";
      default:
        return nullptr;
    }
  }

  // Whether the unread raw bytes can begin a gzip member (0x1f 0x8b).
  bool StartsGzipMagic() const {
    const auto* bytes = reinterpret_cast<const unsigned char*>(in.get() + in_pos);  // NOLINT
    const size_t n = in_len - in_pos;
    return bytes[0] == 0x1f && (n < 2 || bytes[1] == 0x8b);
  }

  size_t ReadGzip(char* out, size_t cap) {
    isal.next_out = reinterpret_cast<uint8_t*>(out);  // NOLINT: ISA-L's unsigned bytes
    isal.avail_out = static_cast<uint32_t>(std::min<size_t>(cap, UINT32_MAX));
    const uint32_t avail_before = isal.avail_out;
    while (isal.avail_out == avail_before && status.ok()) {
      if (!FillIn()) {
        if (in_member && status.ok()) {
          status = absl::InvalidArgumentError(absl::StrCat(
              "truncated gzip data: the file ends inside a member at byte ", raw_read));
        }
        break;
      }
      isal.next_in = reinterpret_cast<uint8_t*>(in.get() + in_pos);  // NOLINT: unsigned bytes
      isal.avail_in = static_cast<uint32_t>(in_len - in_pos);
      if (!in_member) {
        member_start = CompressedOffset();
        // ISA-L waits for a whole header before judging it; bytes after a
        // member that cannot begin one are named here, not as a truncation.
        if (!StartsGzipMagic()) {
          status = absl::InvalidArgumentError(
              absl::StrCat("corrupt gzip data in the member starting at byte ", member_start,
                           ": incorrect header check"));
          break;
        }
      }
      in_member = true;
      const size_t in_before = in_pos;
      const int rc = isal_inflate(&isal);
      in_pos = in_len - isal.avail_in;
      KeepTrailer(reinterpret_cast<const unsigned char*>(in.get()) + in_before,  // NOLINT
                  in_pos - in_before);
      if (rc < 0) {
        const char* what = rc == ISAL_INCORRECT_CHECKSUM ? WrongCheck() : IsalError(rc);
        status = absl::InvalidArgumentError(absl::StrCat(
            "corrupt gzip data in the member starting at byte ", member_start, " (read to byte ",
            CompressedOffset(), "): ", what != nullptr ? what : absl::StrCat("ISA-L error ", rc)));
      } else if (isal.block_state == ISAL_BLOCK_FINISH) {
        // One member done, its trailer checked; RFC 1952 lets another follow.
        in_member = false;
        uint8_t* const next_out = isal.next_out;
        const uint32_t avail_out = isal.avail_out;
        StartMember();
        isal.next_out = next_out;
        isal.avail_out = avail_out;
      }
    }
    return avail_before - isal.avail_out;
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
