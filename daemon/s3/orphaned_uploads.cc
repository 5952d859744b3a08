#include "daemon/s3/orphaned_uploads.h"

#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/common/log.h"
#include "daemon/s3/trace_object_key.h"
#include "daemon/store/trace_file_name.h"

namespace gpuctl::s3 {
namespace {

std::string FormatUtc(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone());
}

}  // namespace

bool IsHostTraceFileKey(absl::string_view prefix, absl::string_view host, absl::string_view key) {
  std::optional<TraceObjectName> name = ParseTraceObjectKey(prefix, key);
  return name.has_value() && daemon::IsTraceFileOfHost(name->file, host);
}

OrphanedUploadsReport AbortOrphanedUploads(S3Client& client, absl::string_view host,
                                           absl::Time cutoff, absl::FunctionRef<bool()> stopped) {
  const std::string& prefix = client.config().prefix;
  const std::string list_prefix = prefix.empty() ? "" : absl::StrCat(prefix, "/");
  OrphanedUploadsReport report;
  std::string key_marker;
  std::string upload_id_marker;
  while (true) {
    if (stopped()) {
      report.status = absl::CancelledError("stopped");
      return report;
    }
    absl::StatusOr<ListMultipartUploadsResult> page =
        client.ListMultipartUploads(list_prefix, key_marker, upload_id_marker);
    if (!page.ok()) {
      report.status = page.status();
      return report;
    }
    for (const MultipartUpload& upload : page->uploads) {
      ++report.listed;
      if (upload.initiated >= cutoff || !IsHostTraceFileKey(prefix, host, upload.key)) continue;
      if (stopped()) {
        report.status = absl::CancelledError("stopped");
        return report;
      }
      absl::Status aborted = client.AbortMultipartUpload(upload.key, upload.upload_id);
      if (aborted.ok()) {
        ++report.aborted;
        LogInfo("aborted an orphaned S3 multipart upload",
                {{"key", upload.key},
                 {"upload_id", upload.upload_id},
                 {"initiated", FormatUtc(upload.initiated)}});
      } else {
        ++report.failed;
        LogWarning(
            "cannot abort an orphaned S3 multipart upload",
            {{"key", upload.key}, {"upload_id", upload.upload_id}, {"error", aborted.message()}});
      }
    }
    if (!page->truncated) return report;
    if (page->next_key_marker == key_marker && page->next_upload_id_marker == upload_id_marker) {
      report.status = absl::DataLossError(absl::StrCat(
          "S3 ListMultipartUploads repeated its markers (key marker \"", key_marker, "\")"));
      return report;
    }
    key_marker = page->next_key_marker;
    upload_id_marker = page->next_upload_id_marker;
  }
}

std::shared_ptr<OrphanedUploadSweep> OrphanedUploadSweep::Start(std::shared_ptr<S3Client> client,
                                                                std::string host, absl::Time cutoff,
                                                                Done done) {
  std::shared_ptr<OrphanedUploadSweep> self(
      new OrphanedUploadSweep(std::move(client), std::move(host), cutoff, std::move(done)));
  self->thread_ = std::thread([self] {
    self->Run();
    self->exited_.Notify();
  });
  return self;
}

OrphanedUploadSweep::OrphanedUploadSweep(std::shared_ptr<S3Client> client, std::string host,
                                         absl::Time cutoff, Done done)
    : client_(std::move(client)), host_(std::move(host)), cutoff_(cutoff), done_(std::move(done)) {}

OrphanedUploadSweep::~OrphanedUploadSweep() {
  // Without a join: reached when the owner let it go without Stop, or on the
  // sweep's own thread after Stop left it running.
  if (thread_.joinable()) thread_.detach();
}

void OrphanedUploadSweep::Run() {
  OrphanedUploadsReport report = AbortOrphanedUploads(
      *client_, host_, cutoff_, [this] { return stopping_.load(std::memory_order_relaxed); });
  std::initializer_list<LogField> fields = {{"host", host_},
                                            {"initiated_before", FormatUtc(cutoff_)},
                                            {"uploads_listed", report.listed},
                                            {"aborted", report.aborted},
                                            {"abort_failures", report.failed}};
  if (report.status.ok()) {
    LogInfo("swept orphaned S3 multipart uploads", fields);
  } else if (!absl::IsCancelled(report.status)) {
    LogWarning(absl::StrCat("sweeping orphaned S3 multipart uploads ended early: ",
                            report.status.message()),
               fields);
  }
  if (done_) done_(report);
}

void OrphanedUploadSweep::Stop(absl::Duration grace) {
  if (stopping_.exchange(true)) return;
  if (!thread_.joinable()) return;
  if (exited_.WaitForNotificationWithTimeout(grace)) {
    thread_.join();
  } else {
    thread_.detach();
  }
}

}  // namespace gpuctl::s3
