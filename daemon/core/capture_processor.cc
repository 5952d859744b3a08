#include "daemon/core/capture_processor.h"

#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/convert/chrome_trace.h"
#include "daemon/convert/gzip.h"
#include "daemon/convert/json_writer.h"
#include "daemon/convert/record_reader.h"
#include "daemon/core/ingest_summary.h"
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

// A kineto trace file (as the bridge re-emits it: one traceEvents element
// per line, the array closed by a line "]") with the host context's events
// added at the end of its traceEvents, timed from its baseTimeNanoseconds
// (kineto writes it after the array; none: absolute microseconds).
absl::StatusOr<std::string> KinetoWithHostContext(absl::string_view gzip, const CaptureJob& job,
                                                  HostContextEvents::Written* written) {
  absl::StatusOr<std::string> text = GzipDecompress(gzip);
  if (!text.ok()) return text.status();
  const size_t events_end = text->find("\n]");
  if (events_end == std::string::npos || events_end == 0) {
    return absl::InvalidArgumentError("no end of traceEvents in the stored kineto trace");
  }
  int64_t base = 0;
  const std::string kBaseKey = "\"baseTimeNanoseconds\":";
  if (const size_t at = text->rfind(kBaseKey); at != std::string::npos && at > events_end) {
    size_t digits = at + kBaseKey.size();
    while (digits < text->size() && (*text)[digits] == ' ') ++digits;
    size_t stop = text->find_first_not_of("0123456789", digits);
    if (stop == std::string::npos) stop = text->size();
    if (!absl::SimpleAtoi(absl::string_view(*text).substr(digits, stop - digits), &base)) base = 0;
  }
  bool first = (*text)[events_end - 1] == '[';
  std::string added;
  *written = job.host_context_events->Write(base, job.window_start_ns, job.window_end_ns,
                                            [&](absl::string_view event) {
                                              absl::StrAppend(&added, first ? "\n" : ",\n", event);
                                              first = false;
                                            });
  text->insert(events_end, added);
  return GzipCompress(*text, job.gzip_level);
}

// A trace the adapter already validated and compressed: stored as it is.
v1::ProcessResult StorePrepared(const CaptureJob& job, TraceStore* store) {
  const PreparedTrace& prepared = *job.payload->prepared();
  absl::Span<const uint8_t> bytes = job.payload->bytes();
  absl::string_view stored(reinterpret_cast<const char*>(bytes.data()), bytes.size());  // NOLINT
  std::optional<v1::HostContextResult> host_context = job.host_context;
  absl::StatusOr<std::string> with_host;
  if (host_context.has_value() && job.host_context_events != nullptr) {
    HostContextEvents::Written written;
    with_host = KinetoWithHostContext(stored, job, &written);
    if (with_host.ok()) {
      stored = *with_host;
      host_context->set_samples(written.samples);
      host_context->set_off_cpu_intervals(written.off_cpu_intervals);
    } else {
      host_context = HostContextUnavailable(
          absl::StrCat("adding it to the kineto trace: ", with_host.status().message()));
    }
  }
  absl::Status st = store->PutFile(job.trace_id, job.file_name, stored);
  if (!st.ok()) {
    return Failure(v1::CAPTURE_STATUS_FAILED, absl::StrCat("storing the trace: ", st.message()));
  }
  v1::ProcessResult result;
  result.set_status(v1::CAPTURE_STATUS_OK);
  result.set_event_count(prepared.event_count);
  result.set_payload_bytes(prepared.source_bytes);
  result.set_stored_bytes(stored.size());
  result.set_file(job.file_name);
  if (host_context.has_value()) *result.mutable_host_context() = *std::move(host_context);
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
  ChromeTraceMeta meta{job.trace_id, job.host, job.file_name, job.process, job.analysis_rank, {}};
  HostContextEvents::Written host_written;
  if (job.host_context_events != nullptr) {
    meta.extra_events = [&job, &host_written](int64_t base, int64_t start, int64_t end,
                                              ChromeTraceMeta::AddEvent add) {
      host_written = job.host_context_events->Write(base, start, end, add);
    };
  }
  IngestSummary summary;
  summary.Reserve(records->kernels.size() + records->memcpys.size() + records->memsets.size());
  absl::Status st = WriteChromeTrace(*records, meta, &sink, &summary);
  if (st.ok()) st = (*encoder)->Finish();
  if (!st.ok()) {
    return Failure(v1::CAPTURE_STATUS_FAILED, absl::StrCat("converting the trace: ", st.message()));
  }
  v1::ProcessResult result;
  *result.mutable_summary() = summary.Finish();
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
  if (job.host_context.has_value()) {
    *result.mutable_host_context() = *job.host_context;
    result.mutable_host_context()->set_samples(host_written.samples);
    result.mutable_host_context()->set_off_cpu_intervals(host_written.off_cpu_intervals);
  }
  result.set_event_count(records->event_count);
  result.set_dropped_events(records->dropped_events);
  result.set_payload_bytes(payload_bytes);
  result.set_stored_bytes(stored.size());
  result.set_file(job.file_name);
  return result;
}

}  // namespace gpuctl::daemon
