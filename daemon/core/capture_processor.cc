#include "daemon/core/capture_processor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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

// A prepared trace's host context, as a file of its own beside it (the
// trace is the process's own file, stored as it is).
v1::HostContextResult StorePreparedHostContext(const CaptureJob& job, TraceStore* store) {
  v1::HostContextResult summary = *job.host_context;
  if (job.host_context_events == nullptr) return summary;
  const int64_t base = ChromeTraceBaseNanos(job.window_start_ns);
  std::string json = "{\"traceEvents\": [";
  bool first = true;
  HostContextEvents::Written written = job.host_context_events->Write(
      base, job.window_start_ns, job.window_end_ns, [&](absl::string_view event) {
        absl::StrAppend(&json, first ? "\n  " : ",\n  ", event);
        first = false;
      });
  absl::StrAppend(&json, "\n],\n\"displayTimeUnit\": \"ms\",\n\"baseTimeNanoseconds\": ", base,
                  "\n}\n");
  auto encoder = GzipEncoder::Create(job.gzip_level);
  absl::Status st = encoder.ok() ? (*encoder)->Append(json) : encoder.status();
  if (st.ok()) st = (*encoder)->Finish();
  const std::string name = HostContextFileName(job.file_name);
  if (st.ok()) st = store->PutFile(job.trace_id, name, (*encoder)->output());
  if (!st.ok()) {
    return HostContextUnavailable(absl::StrCat("storing ", name, ": ", st.message()));
  }
  summary.set_samples(written.samples);
  summary.set_off_cpu_intervals(written.off_cpu_intervals);
  summary.set_file(name);
  return summary;
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
  if (job.host_context.has_value()) {
    *result.mutable_host_context() = StorePreparedHostContext(job, store);
  }
  return result;
}

}  // namespace

std::string HostContextFileName(absl::string_view file_name) {
  absl::string_view stem = file_name;
  absl::ConsumeSuffix(&stem, ".json.gz");
  return absl::StrCat(stem, ".host.json.gz");
}

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
