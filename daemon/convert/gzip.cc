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
constexpr size_t kChunk = 64 * 1024;
constexpr size_t kMaxZlibInput = std::numeric_limits<uInt>::max();

// zlib takes non-const input pointers but never writes through them.
Bytef* ZlibIn(absl::string_view data) {
  return const_cast<Bytef*>(reinterpret_cast<const Bytef*>(data.data()));  // NOLINT
}

}  // namespace

// libdeflate compresses a whole buffer at once, two to three times faster
// than zlib's streaming deflate at the same level and no larger; it has no
// streaming interface. The input is gathered into pieces of kMemberBytes,
// each compressed into one gzip member. Losing the 32 KiB window at each
// boundary costs well under 0.1 % of the size.
struct GzipEncoder::State {
  libdeflate_compressor* compressor = nullptr;
  std::string pending;
};

absl::StatusOr<std::unique_ptr<GzipEncoder>> GzipEncoder::Create(int level) {
  if (level < 0 || level > 9) {
    return absl::InvalidArgumentError(absl::StrCat("gzip level ", level, " is outside [0, 9]"));
  }
  auto state = std::make_unique<State>();
  state->compressor = libdeflate_alloc_compressor(level);
  if (state->compressor == nullptr)
    return absl::ResourceExhaustedError("libdeflate: out of memory");
  state->pending.reserve(kMemberBytes);
  return std::unique_ptr<GzipEncoder>(new GzipEncoder(std::move(state)));
}

GzipEncoder::GzipEncoder(std::unique_ptr<State> state) : state_(std::move(state)) {}

GzipEncoder::~GzipEncoder() { libdeflate_free_compressor(state_->compressor); }

absl::Status GzipEncoder::CompressMember(absl::string_view data) {
  size_t bound = libdeflate_gzip_compress_bound(state_->compressor, data.size());
  size_t old = output_.size();
  output_.resize(old + bound);
  size_t n = libdeflate_gzip_compress(state_->compressor, data.data(), data.size(),
                                      output_.data() + old, bound);
  output_.resize(old + n);
  if (n == 0) return absl::InternalError("libdeflate: compressed member exceeds its bound");
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
  // An empty input still makes one (empty) member: a valid gzip file.
  if (!state_->pending.empty() || output_.empty()) {
    if (auto st = CompressMember(state_->pending); !st.ok()) return st;
  }
  state_->pending.clear();
  state_->pending.shrink_to_fit();
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
