#include "daemon/convert/gzip.h"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace gpuctl::daemon {
namespace {

// windowBits 15 + 32: zlib detects the gzip wrapper on input.
constexpr int kAutoWindowBits = 15 + 32;
constexpr size_t kChunk = size_t{64} * 1024;
constexpr size_t kMaxZlibInput = std::numeric_limits<uInt>::max();

// zlib takes non-const input pointers but never writes through them.
Bytef* ZlibIn(absl::string_view data) {
  return const_cast<Bytef*>(reinterpret_cast<const Bytef*>(data.data()));  // NOLINT
}

}  // namespace

// libdeflate compresses a whole buffer at once, two to three times faster
// than zlib's streaming deflate at the same level and no larger; it has no
// streaming interface. The input is gathered into pieces of kMemberBytes,
// each compressed into a raw DEFLATE stream, and the streams are joined
// into the one stream of a single gzip member, as zlib's examples/gzjoin.c
// joins files: in every stream but the last, the final block's BFINAL bit
// is cleared and an empty stored block (BFINAL 0, LEN 0, NLEN 0xffff)
// follows it, which ends at a byte boundary where the next stream's first
// block begins. Finding the final block's header takes walking the
// stream's blocks (zlib's inflate with Z_BLOCK, output discarded): the one
// cost of the single member, measured in docs/benchmarks.md. Losing the
// 32 KiB window at each boundary costs well under 0.1 % of the size.
struct GzipEncoder::State {
  libdeflate_compressor* compressor = nullptr;
  std::string pending;
  // The previous piece's raw DEFLATE stream, held until it is known
  // whether another piece follows it.
  std::string held;
  bool holding = false;
  uint32_t crc = 0;
  uint64_t input_bytes = 0;
  z_stream walker{};  // initialised by Create, ended by the destructor
  std::string scratch;
};

namespace {

// Where a raw DEFLATE stream's final block begins (the byte and bit of its
// BFINAL flag) and how many bits of its last byte are unused.
struct StreamEnd {
  size_t final_byte = 0;
  uint8_t final_mask = 0;
  int unused_bits = 0;
};

// Walks the blocks of one complete raw DEFLATE stream with zlib's inflate
// (Z_BLOCK stops at each block boundary; data_type says how many bits of
// the last byte read are unused, +64 inside the last block, +128 at a
// boundary).
absl::StatusOr<StreamEnd> FindStreamEnd(z_stream* zs, std::string* scratch,
                                        absl::string_view stream) {
  if (inflateReset(zs) != Z_OK) return absl::InternalError("inflateReset failed");
  if (stream.empty()) return absl::InternalError("libdeflate produced an empty stream");
  const auto* begin = reinterpret_cast<const Bytef*>(stream.data());  // NOLINT
  zs->next_in = ZlibIn(stream);
  zs->avail_in = static_cast<uInt>(stream.size());
  // The first block's header starts the stream.
  StreamEnd end{.final_byte = 0, .final_mask = 1, .unused_bits = 0};
  bool in_last = (begin[0] & 1) != 0;
  while (true) {
    zs->next_out = reinterpret_cast<Bytef*>(scratch->data());  // NOLINT
    zs->avail_out = static_cast<uInt>(scratch->size());
    const int rc = inflate(zs, Z_BLOCK);
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return absl::InternalError(absl::StrCat("walking a DEFLATE stream: zlib error ", rc));
    }
    if ((zs->data_type & 128) == 0) {
      if (zs->avail_in == 0 && zs->avail_out != 0) {
        return absl::InternalError("walking a DEFLATE stream: it ends inside a block");
      }
      continue;
    }
    // A block boundary: the next block's header starts here, unless the
    // block just ended was the last.
    if (in_last) break;
    const int unused = zs->data_type & 7;
    const size_t consumed = static_cast<size_t>(zs->next_in - begin);
    if (unused != 0) {
      end.final_byte = consumed - 1;
      end.final_mask = static_cast<uint8_t>(0x100 >> unused);
    } else {
      if (consumed >= stream.size()) {
        return absl::InternalError("walking a DEFLATE stream: no final block");
      }
      end.final_byte = consumed;
      end.final_mask = 1;
    }
    in_last = (begin[end.final_byte] & end.final_mask) != 0;
  }
  if (zs->avail_in != 0) {
    return absl::InternalError("walking a DEFLATE stream: bytes after its final block");
  }
  end.unused_bits = zs->data_type & 7;
  return end;
}

// The gzip header (RFC 1952 2.3): deflate, no flags, no time, OS unknown.
constexpr char kGzipHeader[] = {'\x1f', '\x8b', '\x08', '\x00', '\x00',
                                '\x00', '\x00', '\x00', '\x00', '\xff'};

void AppendLittleEndian32(std::string* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GzipEncoder>> GzipEncoder::Create(int level) {
  if (level < 0 || level > 9) {
    return absl::InvalidArgumentError(absl::StrCat("gzip level ", level, " is outside [0, 9]"));
  }
  auto state = std::make_unique<State>();
  state->compressor = libdeflate_alloc_compressor(level);
  if (state->compressor == nullptr)
    return absl::ResourceExhaustedError("libdeflate: out of memory");
  if (inflateInit2(&state->walker, -15) != Z_OK) {
    libdeflate_free_compressor(state->compressor);
    return absl::ResourceExhaustedError("zlib: inflateInit2 failed");
  }
  state->scratch.resize(kChunk);
  state->pending.reserve(kMemberBytes);
  return std::unique_ptr<GzipEncoder>(new GzipEncoder(std::move(state)));
}

GzipEncoder::GzipEncoder(std::unique_ptr<State> state) : state_(std::move(state)) {
  output_.append(kGzipHeader, sizeof(kGzipHeader));
}

GzipEncoder::~GzipEncoder() {
  libdeflate_free_compressor(state_->compressor);
  inflateEnd(&state_->walker);
}

// Appends the held stream to the output; `more` says another stream
// follows it, which it is then joined to.
absl::Status GzipEncoder::ReleaseHeld(bool more) {
  State& st = *state_;
  if (!st.holding) return absl::OkStatus();
  st.holding = false;
  if (!more) {
    output_.append(st.held);
    return absl::OkStatus();
  }
  absl::StatusOr<StreamEnd> end = FindStreamEnd(&st.walker, &st.scratch, st.held);
  if (!end.ok()) return end.status();
  std::string& held = st.held;
  held[end->final_byte] = static_cast<char>(held[end->final_byte] & ~end->final_mask);
  // The unused high bits of the last byte are zero; the stored block's
  // three header bits (all zero) go there if they fit, else into a byte of
  // their own; LEN and NLEN start at the next byte boundary.
  held.back() = static_cast<char>(held.back() & (0xff >> end->unused_bits));
  output_.append(held);
  if (end->unused_bits < 3) output_.push_back('\0');
  output_.append("\x00\x00\xff\xff", 4);
  return absl::OkStatus();
}

absl::Status GzipEncoder::CompressMember(absl::string_view data) {
  State& st = *state_;
  if (absl::Status s = ReleaseHeld(/*more=*/true); !s.ok()) return s;
  const size_t bound = libdeflate_deflate_compress_bound(st.compressor, data.size());
  st.held.resize(bound);
  const size_t n =
      libdeflate_deflate_compress(st.compressor, data.data(), data.size(), st.held.data(), bound);
  if (n == 0) return absl::InternalError("libdeflate: compressed piece exceeds its bound");
  st.held.resize(n);
  st.holding = true;
  st.crc = libdeflate_crc32(st.crc, data.data(), data.size());
  st.input_bytes += data.size();
  return absl::OkStatus();
}

absl::Status GzipEncoder::Append(absl::string_view data) {
  if (finished_) return absl::FailedPreconditionError("gzip stream already finished");
  std::string& pending = state_->pending;
  while (!data.empty()) {
    // A large piece with nothing pending is compressed in place.
    if (pending.empty() && data.size() >= kMemberBytes) {
      if (auto st = CompressMember(data.substr(0, kMemberBytes)); !st.ok()) return st;
      data.remove_prefix(kMemberBytes);
      continue;
    }
    size_t take = std::min(data.size(), kMemberBytes - pending.size());
    pending.append(data.data(), take);
    data.remove_prefix(take);
    if (pending.size() == kMemberBytes) {
      if (auto st = CompressMember(pending); !st.ok()) return st;
      pending.clear();
    }
  }
  return absl::OkStatus();
}

absl::Status GzipEncoder::Finish() {
  if (finished_) return absl::FailedPreconditionError("gzip stream already finished");
  finished_ = true;
  State& st = *state_;
  // An empty input still makes one (empty) stream: a valid gzip file.
  if (!st.pending.empty() || !st.holding) {
    if (auto s = CompressMember(st.pending); !s.ok()) return s;
  }
  if (auto s = ReleaseHeld(/*more=*/false); !s.ok()) return s;
  AppendLittleEndian32(&output_, st.crc);
  AppendLittleEndian32(&output_, static_cast<uint32_t>(st.input_bytes));  // ISIZE: mod 2^32
  st.pending.clear();
  st.pending.shrink_to_fit();
  st.held.clear();
  st.held.shrink_to_fit();
  return absl::OkStatus();
}

absl::StatusOr<std::string> GzipCompress(absl::string_view data, int level) {
  auto encoder = GzipEncoder::Create(level);
  if (!encoder.ok()) return encoder.status();
  if (auto st = (*encoder)->Append(data); !st.ok()) return st;
  if (auto st = (*encoder)->Finish(); !st.ok()) return st;
  return (*encoder)->TakeOutput();
}

absl::StatusOr<std::string> GzipDecompress(absl::string_view data, size_t max_output_bytes) {
  z_stream zs{};
  if (inflateInit2(&zs, kAutoWindowBits) != Z_OK) return absl::InternalError("inflateInit2 failed");
  std::string out;
  absl::Status status;
  // `data` holds the input not yet handed to zlib.
  while (true) {
    if (zs.avail_in == 0 && !data.empty()) {
      size_t piece = std::min(data.size(), kMaxZlibInput);
      zs.next_in = ZlibIn(data);
      zs.avail_in = static_cast<uInt>(piece);
      data.remove_prefix(piece);
    }
    size_t old = out.size();
    out.resize(old + kChunk);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + old);  // NOLINT
    zs.avail_out = static_cast<uInt>(kChunk);
    int rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(old + kChunk - zs.avail_out);
    bool input_done = zs.avail_in == 0 && data.empty();
    if (out.size() > max_output_bytes) {
      status = absl::ResourceExhaustedError(
          absl::StrCat("gzip output exceeds ", max_output_bytes, " bytes"));
      break;
    }
    if (rc == Z_STREAM_END) {
      if (input_done) break;
      inflateReset(&zs);  // another member follows
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      status = absl::InvalidArgumentError(absl::StrCat("corrupt gzip data (zlib error ", rc, ")"));
      break;
    }
    if (input_done && zs.avail_out != 0) {
      status = absl::InvalidArgumentError("truncated gzip data");
      break;
    }
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  return out;
}

}  // namespace gpuctl::daemon
