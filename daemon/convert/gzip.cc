#include "daemon/convert/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace gpuctl::daemon {
namespace {

// windowBits 15 + 16 selects the gzip wrapper; 15 + 32 auto-detects on input.
constexpr int kGzipWindowBits = 15 + 16;
constexpr int kAutoWindowBits = 15 + 32;
constexpr size_t kChunk = 64 * 1024;
constexpr size_t kMaxZlibInput = std::numeric_limits<uInt>::max();

// zlib takes non-const input pointers but never writes through them.
Bytef* ZlibIn(absl::string_view data) {
  return const_cast<Bytef*>(reinterpret_cast<const Bytef*>(data.data()));  // NOLINT
}

}  // namespace

struct GzipEncoder::State {
  z_stream stream{};
};

absl::StatusOr<std::unique_ptr<GzipEncoder>> GzipEncoder::Create(int level) {
  if (level < 0 || level > 9) {
    return absl::InvalidArgumentError(absl::StrCat("gzip level ", level, " is outside [0, 9]"));
  }
  auto state = std::make_unique<State>();
  int rc = deflateInit2(&state->stream, level, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY);
  if (rc != Z_OK) return absl::InternalError(absl::StrCat("deflateInit2 failed: ", rc));
  return std::unique_ptr<GzipEncoder>(new GzipEncoder(std::move(state)));
}

GzipEncoder::GzipEncoder(std::unique_ptr<State> state) : state_(std::move(state)) {}

GzipEncoder::~GzipEncoder() { deflateEnd(&state_->stream); }

absl::Status GzipEncoder::Deflate(absl::string_view data, bool finish) {
  z_stream& zs = state_->stream;
  while (true) {
    size_t piece = std::min(data.size(), kMaxZlibInput);
    zs.next_in = ZlibIn(data);
    zs.avail_in = static_cast<uInt>(piece);
    bool last_piece = piece == data.size();
    int flush = finish && last_piece ? Z_FINISH : Z_NO_FLUSH;
    int rc;
    do {
      size_t old = output_.size();
      output_.resize(old + kChunk);
      zs.next_out = reinterpret_cast<Bytef*>(output_.data() + old);  // NOLINT
      zs.avail_out = static_cast<uInt>(kChunk);
      rc = deflate(&zs, flush);
      output_.resize(old + kChunk - zs.avail_out);
      if (rc == Z_STREAM_ERROR) return absl::InternalError("deflate failed");
    } while (zs.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    data.remove_prefix(piece);
    if (last_piece) return absl::OkStatus();
  }
}

absl::Status GzipEncoder::Append(absl::string_view data) {
  if (finished_) return absl::FailedPreconditionError("gzip stream already finished");
  if (data.empty()) return absl::OkStatus();
  return Deflate(data, /*finish=*/false);
}

absl::Status GzipEncoder::Finish() {
  if (finished_) return absl::FailedPreconditionError("gzip stream already finished");
  finished_ = true;
  return Deflate(absl::string_view(), /*finish=*/true);
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
