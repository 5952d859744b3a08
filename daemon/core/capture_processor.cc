#include "daemon/core/capture_processor.h"

#include "absl/strings/str_cat.h"
#include "daemon/convert/chrome_trace.h"
#include "daemon/convert/gzip.h"
#include "daemon/convert/json_writer.h"
#include "daemon/convert/record_reader.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::daemon {
namespace {

// Streams JSON text straight into the compressor.
class GzipSink final : public ByteSink {
 public:
  explicit GzipSink(GzipEncoder* encoder) : encoder_(encoder) {}
  absl::Status Append(absl::string_view data) override { return encoder_->Append(data); }

 private:
  GzipEncoder* encoder_;
};

v1::ProcessResult Failure(v1::CaptureStatus status, std::string message) {
  v1::ProcessResult result;
  result.set_status(status);
  result.set_message(std::move(message));
  return result;
}

// CUPTI drops and host-only state: from the payload's capture info when it
// has one, else as the process reported them.
void SetCaptureInfo(const DecodedRecords& decoded, const CaptureJob& job,
                    v1::ProcessResult* result) {
  if (!decoded.capture_info.has_value()) {
    result->set_host_only(job.reported_host_only);
    result->set_cupti_dropped_records(job.reported_cupti_dropped);
    return;
  }
  const CaptureInfoRecord& info = *decoded.capture_info;
  const std::string message = RepairUtf8(decoded.strings[info.message]);
  result->set_cupti_dropped_records(info.dropped_by_cupti);
  if (info.flags & records::kCaptureFlagHostOnly) {
    result->set_host_only(true);
    result->set_message(absl::StrCat("host-only trace: ", message));
  } else if (info.flags & records::kCaptureFlagCuptiFailed) {
    result->set_message(absl::StrCat("GPU activity incomplete: ", message));
  }
}

// A trace the adapter already validated and compressed: stored as it is.
v1::ProcessResult StorePrepared(const CaptureJob& job, TraceStore* store) {
  const PreparedTrace& prepared = *job.payload->prepared();
  absl::Span<const uint8_t> bytes = job.payload->bytes();
  absl::Status st = store->PutFile(
      job.trace_id, job.file_name,
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));  // NOLINT
  if (!st.ok()) {
    return Failure(v1::CAPTURE_STATUS_FAILED, absl::StrCat("storing the trace: ", st.message()));
  }
  v1::ProcessResult result;
  result.set_status(v1::CAPTURE_STATUS_OK);
  result.set_event_count(prepared.event_count);
  result.set_payload_bytes(prepared.source_bytes);
  result.set_stored_bytes(bytes.size());
  result.set_file(job.file_name);
  return result;
}

}  // namespace

v1::ProcessResult ProcessCapture(CaptureJob job, TraceStore* store) {
  if (job.payload->prepared() != nullptr) return StorePrepared(job, store);
  absl::Span<const uint8_t> bytes = job.payload->bytes();
  const uint64_t payload_bytes = bytes.size();
  RecordReaderOptions reader_options;
  reader_options.expected_pid = job.own_pid;
  reader_options.timestamp_slack = job.timestamp_slack;
  auto records = ReadRecords(bytes, reader_options);
  if (!records.ok()) {
    auto result = Failure(v1::CAPTURE_STATUS_REJECTED,
                          absl::StrCat("invalid trace data: ", records.status().message()));
    result.set_payload_bytes(payload_bytes);
    return result;
  }

  auto encoder = GzipEncoder::Create(job.gzip_level);
  if (!encoder.ok()) return Failure(v1::CAPTURE_STATUS_FAILED, encoder.status().ToString());
  GzipSink sink(encoder->get());
  ChromeTraceMeta meta{job.trace_id, job.host, job.file_name, job.process, job.analysis_rank};
  absl::Status st = WriteChromeTrace(*records, meta, &sink);
  if (st.ok()) st = (*encoder)->Finish();
  if (!st.ok()) {
    return Failure(v1::CAPTURE_STATUS_FAILED, absl::StrCat("converting the trace: ", st.message()));
  }
  v1::ProcessResult result;
  // Copies the capture info's strings, which point into the payload.
  SetCaptureInfo(*records, job, &result);
  // The payload (possibly a large mapping) is no longer needed; nothing in
  // `records` may be read after this.
  job.payload.reset();

  const std::string& stored = (*encoder)->output();
  st = store->PutFile(job.trace_id, job.file_name, stored);
  if (!st.ok()) {
    return Failure(v1::CAPTURE_STATUS_FAILED, absl::StrCat("storing the trace: ", st.message()));
  }
  result.set_status(v1::CAPTURE_STATUS_OK);
  result.set_event_count(records->event_count);
  result.set_dropped_events(records->dropped_events);
  result.set_payload_bytes(payload_bytes);
  result.set_stored_bytes(stored.size());
  result.set_file(job.file_name);
  return result;
}

}  // namespace gpuctl::daemon
