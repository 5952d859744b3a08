#include "daemon/merge/merge_output.h"

#include <zlib.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/posix_file.h"

namespace gpuctl::merge {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

}  // namespace

struct MergeOutput::State {
  std::unique_ptr<AtomicFile> file;
  bool gzip = false;
  z_stream zs{};
  bool zs_ready = false;
  std::string pending;     // written, not yet flushed
  std::string compressed;  // deflate's output buffer
  ~State() {
    if (zs_ready) deflateEnd(&zs);
  }
};

MergeOutput::MergeOutput(std::unique_ptr<State> state) : state_(std::move(state)) {}
MergeOutput::~MergeOutput() = default;

absl::StatusOr<std::unique_ptr<MergeOutput>> MergeOutput::Create(const std::string& path,
                                                                 bool gzip) {
  absl::StatusOr<std::unique_ptr<AtomicFile>> file =
      AtomicFile::Create(path, absl::StrCat(ParentDir(path), "/.gpuctl-merge.XXXXXX"), 0644);
  if (!file.ok()) return file.status();
  auto state = std::make_unique<State>();
  state->file = *std::move(file);
  state->gzip = gzip;
  if (gzip) {
    // windowBits 15 + 16: a gzip wrapper, as gpuctld's own files have.
    if (deflateInit2(&state->zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      return absl::ResourceExhaustedError(absl::StrCat(path, ": cannot start gzip compression"));
    }
    state->zs_ready = true;
    state->compressed.resize(kBufferBytes);
  }
  state->pending.reserve(kBufferBytes);
  return std::unique_ptr<MergeOutput>(new MergeOutput(std::move(state)));
}

absl::Status MergeOutput::Write(absl::string_view data) {
  state_->pending.append(data.data(), data.size());
  if (state_->pending.size() < kBufferBytes) return absl::OkStatus();
  return Flush(/*finish=*/false);
}

absl::Status MergeOutput::Flush(bool finish) {
  State& s = *state_;
  if (!s.gzip) {
    absl::Status written = s.file->Append(s.pending);
    s.pending.clear();
    return written;
  }
  s.zs.next_in = reinterpret_cast<Bytef*>(s.pending.data());  // NOLINT: zlib's unsigned bytes
  s.zs.avail_in = static_cast<uInt>(s.pending.size());
  int rc = Z_OK;
  do {
    s.zs.next_out = reinterpret_cast<Bytef*>(s.compressed.data());  // NOLINT: zlib's unsigned bytes
    s.zs.avail_out = static_cast<uInt>(s.compressed.size());
    rc = deflate(&s.zs, finish ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) {
      return absl::InternalError(absl::StrCat(s.file->final_path(), ": gzip compression failed"));
    }
    const size_t produced = s.compressed.size() - s.zs.avail_out;
    if (absl::Status a = s.file->Append(absl::string_view(s.compressed.data(), produced));
        !a.ok()) {
      return a;
    }
  } while (s.zs.avail_out == 0 || (finish && rc != Z_STREAM_END));
  s.pending.clear();
  return absl::OkStatus();
}

absl::Status MergeOutput::Commit() {
  if (absl::Status s = Flush(/*finish=*/true); !s.ok()) return s;
  stored_bytes_ = state_->file->written();
  return state_->file->Commit();
}

}  // namespace gpuctl::merge
