#include "cli/download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/connection.h"
#include "cli/format.h"
#include "grpcpp/client_context.h"

namespace gpuctl::cli {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// One file being received into a temporary.
class PartialFile {
 public:
  PartialFile() = default;
  PartialFile(const PartialFile&) = delete;
  PartialFile& operator=(const PartialFile&) = delete;
  ~PartialFile() { Abandon(); }

  absl::Status Open(const std::string& dir, const std::string& name, uint64_t size) {
    absl::StatusOr<std::string> final_path = SavedFilePath(dir, name);
    if (!final_path.ok()) return final_path.status();
    absl::StatusOr<std::string> temp_path = TemporaryFileTemplate(dir, name);
    if (!temp_path.ok()) return temp_path.status();
    final_path_ = std::move(*final_path);
    temp_path_ = std::move(*temp_path);
    fd_ = mkostemp(temp_path_.data(), O_CLOEXEC);
    if (fd_ < 0) return ErrnoError("cannot create", temp_path_);
    size_ = size;
    return absl::OkStatus();
  }

  absl::Status Append(absl::string_view data) {
    while (!data.empty()) {
      ssize_t n = write(fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError("cannot write", temp_path_);
      data.remove_prefix(static_cast<size_t>(n));
      written_ += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }

  absl::Status Commit() {
    if (fchmod(fd_, 0644) != 0) return ErrnoError("cannot chmod", temp_path_);
    if (fsync(fd_) != 0) return ErrnoError("cannot sync", temp_path_);
    int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) return ErrnoError("cannot close", temp_path_);
    if (rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
      return ErrnoError("cannot rename to", final_path_);
    }
    temp_path_.clear();
    return absl::OkStatus();
  }

  void Abandon() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    if (!temp_path_.empty()) unlink(temp_path_.c_str());
    temp_path_.clear();
  }

  uint64_t size() const { return size_; }
  uint64_t written() const { return written_; }
  bool complete() const { return written_ == size_; }

 private:
  std::string final_path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t written_ = 0;
};

absl::Status BadChunk(const v1::TraceChunk& chunk, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("refusing file \"", Printable(chunk.file().substr(0, 64)),
                                          "\" from the daemon: ", why));
}

// Applies the chunk stream to the directory; see DownloadTrace.
class Receiver {
 public:
  Receiver(std::string dir, const std::vector<std::string>& wanted,
           const std::map<std::string, std::string>& local_names)
      : dir_(std::move(dir)), wanted_(wanted.begin(), wanted.end()), local_names_(local_names) {}

  absl::Status Accept(const v1::TraceChunk& chunk) {
    if (!IsSafeName(chunk.file())) return BadChunk(chunk, "unsafe file name");
    if (!wanted_.empty() && !wanted_.contains(chunk.file())) {
      return BadChunk(chunk, "not requested");
    }
    if (done_names_.contains(chunk.file())) return BadChunk(chunk, "sent twice");
    auto [it, inserted] = open_.try_emplace(chunk.file());
    PartialFile& file = it->second;
    if (inserted) {
      if (absl::Status s = file.Open(dir_, LocalName(chunk.file()), chunk.file_size()); !s.ok()) {
        return s;
      }
    } else if (chunk.file_size() != file.size()) {
      return BadChunk(chunk, "file size changed during the transfer");
    }
    if (chunk.offset() != file.written()) return BadChunk(chunk, "chunk out of order");
    if (chunk.data().size() > file.size() - file.written()) {
      return BadChunk(chunk, "more data than the announced size");
    }
    if (absl::Status s = file.Append(chunk.data()); !s.ok()) return s;
    if (file.complete()) {
      if (absl::Status s = file.Commit(); !s.ok()) return s;
      done_.push_back(DownloadedFile{LocalName(chunk.file()), file.size()});
      done_names_.insert(chunk.file());
      open_.erase(it);
    }
    return absl::OkStatus();
  }

  // After the stream ended cleanly.
  absl::Status Finish() {
    if (!open_.empty()) {
      const auto& [name, file] = *open_.begin();
      return absl::DataLossError(absl::StrCat("the daemon ended the transfer of \"", name,
                                              "\" after ", file.written(), " of ", file.size(),
                                              " bytes"));
    }
    for (const std::string& name : wanted_) {
      if (!done_names_.contains(name)) {
        return absl::DataLossError(absl::StrCat("the daemon did not send \"", name, "\""));
      }
    }
    if (done_.empty()) return absl::DataLossError("the daemon sent no file");
    return absl::OkStatus();
  }

  std::vector<DownloadedFile> TakeFiles() { return std::move(done_); }

 private:
  std::string LocalName(const std::string& name) const {
    auto it = local_names_.find(name);
    return it == local_names_.end() ? name : it->second;
  }

  const std::string dir_;
  const std::set<std::string> wanted_;
  const std::map<std::string, std::string>& local_names_;
  std::map<std::string, PartialFile> open_;
  std::set<std::string> done_names_;
  std::vector<DownloadedFile> done_;
};

}  // namespace

absl::StatusOr<DownloadResult> DownloadTrace(v1::Gpuctl::StubInterface& stub,
                                             const DownloadOptions& options) {
  if (!IsSafeName(options.trace_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsafe trace id \"", Printable(options.trace_id), "\""));
  }
  for (const std::string& name : options.files) {
    if (!IsSafeName(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unsafe file name \"", Printable(name), "\""));
    }
  }
  for (const auto& [name, local] : options.local_names) {
    if (!IsSafeName(local)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsafe local file name \"", Printable(local), "\""));
    }
  }
  absl::StatusOr<std::string> directory = TraceDirectory(options.output_root, options.trace_id);
  if (!directory.ok()) return directory.status();
  DownloadResult result;
  result.directory = std::move(*directory);
  std::error_code ec;
  std::filesystem::create_directories(result.directory, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create ", result.directory, ": ", ec.message()));
  }

  v1::GetTraceRequest request;
  request.set_trace_id(options.trace_id);
  for (const std::string& name : options.files) request.add_files(name);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  CancelGroup::Scope cancel_scope(options.cancel, &context);

  Receiver receiver(result.directory, options.files, options.local_names);
  std::unique_ptr<grpc::ClientReaderInterface<v1::TraceChunk>> reader =
      stub.GetTrace(&context, request);
  v1::TraceChunk chunk;
  absl::Status local;
  while (local.ok() && reader->Read(&chunk)) local = receiver.Accept(chunk);
  if (!local.ok()) context.TryCancel();
  grpc::Status rpc = reader->Finish();
  if (options.cancel != nullptr && options.cancel->cancelled()) {
    return absl::CancelledError("download interrupted");
  }
  if (!local.ok()) return local;
  if (!rpc.ok()) return FromRpcStatus(rpc);
  if (absl::Status s = receiver.Finish(); !s.ok()) return s;
  result.files = receiver.TakeFiles();
  return result;
}

}  // namespace gpuctl::cli
