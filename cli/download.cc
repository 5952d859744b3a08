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
#include "daemon/common/posix_file.h"
#include "grpcpp/client_context.h"

namespace gpuctl::cli {
namespace {

// One file being received into a temporary, renamed into place whole.
class PartialFile {
 public:
  absl::Status Open(const std::string& dir, const std::string& name, uint64_t size) {
    absl::StatusOr<SaveLocation> where = LocateSavedFile(dir, name);
    if (!where.ok()) return where.status();
    if (where->directory != dir && ::mkdir(where->directory.c_str(), 0755) != 0 &&
        errno != EEXIST) {
      return absl::InternalError(
          absl::StrCat("cannot create ", where->directory, ": ", std::strerror(errno)));
    }
    absl::StatusOr<std::string> final_path = SavedFilePath(where->directory, where->name);
    if (!final_path.ok()) return final_path.status();
    absl::StatusOr<std::string> temp_path = TemporaryFileTemplate(where->directory, where->name);
    if (!temp_path.ok()) return temp_path.status();
    absl::StatusOr<std::unique_ptr<AtomicFile>> file =
        AtomicFile::Create(std::move(*final_path), std::move(*temp_path), 0644);
    if (!file.ok()) return file.status();
    file_ = std::move(*file);
    size_ = size;
    return absl::OkStatus();
  }
  absl::Status Append(absl::string_view data) { return file_->Append(data); }
  absl::Status Commit() { return file_->Commit(); }

  uint64_t size() const { return size_; }
  uint64_t written() const { return file_ == nullptr ? 0 : file_->written(); }
  bool complete() const { return written() == size_; }

 private:
  std::unique_ptr<AtomicFile> file_;
  uint64_t size_ = 0;
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
    if (!IsSafeTracePath(chunk.file())) return BadChunk(chunk, "unsafe file name");
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
    bytes_written_ += chunk.data().size();
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
  size_t files_done() const { return done_.size(); }
  uint64_t bytes_written() const { return bytes_written_; }

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
  uint64_t bytes_written_ = 0;
};

}  // namespace

absl::StatusOr<DownloadResult> DownloadTrace(v1::Gpuctl::StubInterface& stub,
                                             const DownloadOptions& options) {
  if (!IsSafeName(options.trace_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsafe trace id \"", Printable(options.trace_id), "\""));
  }
  for (const std::string& name : options.files) {
    if (!IsSafeTracePath(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unsafe file name \"", Printable(name), "\""));
    }
  }
  for (const auto& [name, local] : options.local_names) {
    if (!IsSafeTracePath(local)) {
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
  request.set_bucket(options.bucket);
  for (const std::string& name : options.files) request.add_files(name);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  CancelGroup::Scope cancel_scope(options.cancel, &context);

  Receiver receiver(result.directory, options.files, options.local_names);
  std::unique_ptr<grpc::ClientReaderInterface<v1::TraceChunk>> reader =
      stub.GetTrace(&context, request);
  v1::TraceChunk chunk;
  absl::Status local;
  bool first = true;
  while (local.ok() && reader->Read(&chunk)) {
    if (first) {
      first = false;
      result.trace_status = chunk.trace_status();
      result.cancellation = chunk.cancellation();
    }
    local = receiver.Accept(chunk);
    if (local.ok() && options.on_progress) {
      options.on_progress(receiver.files_done(), receiver.bytes_written());
    }
  }
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
