// A producer of capture records (host annotations, CUPTI).
//
// Lifecycle, one capture at a time, the calls never concurrent:
//   Prepare -> Start [-> StopRecording] -> Stop -> Collect  (a completed window)
//   Prepare [-> Start] -> Abort              (cancelled or disconnected)
// Everything runs on the agent thread, except that an iteration window
// calls Start and StopRecording on the application thread that marked the
// window's first and closing steps (under the capture session's lock).
// Prepare may allocate and may fail (the capture then fails with its
// message). Start opens the window: from then on the source records until
// Stop returns; after Stop returns no new record is added. Collect appends
// the records to the writer and frees them. Abort frees everything without
// collecting. Any method may be called again for the next capture.
#ifndef GPUCTL_CLIENT_LIB_SRC_ACTIVITY_SOURCE_H_
#define GPUCTL_CLIENT_LIB_SRC_ACTIVITY_SOURCE_H_

#include <cstdint>
#include <string>

#include "client_lib/src/record_writer.h"
#include "client_lib/src/wire/ipc_messages.h"

namespace gpuctl::client {

struct CaptureRequest {
  std::string trace_id;
  // Cap on the record bytes this source may keep; past it records are
  // dropped and counted.
  uint64_t max_buffer_bytes = 0;
  // records::kActivity* bits of the GPU activity asked for (0: none).
  uint32_t activities = 0;
  // Size of each CUPTI host buffer; 0: the source's default.
  uint64_t activity_buffer_bytes = 0;
};

// Why a source cannot capture: the capture's result status and message.
struct PrepareError {
  wire::CaptureStatus status = wire::CaptureStatus::kFailed;
  std::string message;
};

struct CollectStats {
  uint64_t dropped_events = 0;
  // Of dropped_events, the records CUPTI reported lost.
  uint64_t cupti_dropped = 0;
  // GPU activity was asked for but the payload is host-only.
  bool host_only = false;
  // For the result's message: why host-only, or what failed ("" if none).
  std::string message;
};

class ActivitySource {
 public:
  virtual ~ActivitySource() = default;

  // Returns false with `error` set when the source cannot capture.
  virtual bool Prepare(const CaptureRequest& request, PrepareError* error) = 0;
  // `window_start_ns` is the CLOCK_REALTIME instant the window opened.
  virtual void Start(int64_t window_start_ns) = 0;
  // Called on the application thread that marked an iteration window's
  // closing step, before Stop(window_end_ns) on the agent thread: a source
  // that can stop taking records at once, without blocking, does it here,
  // so nothing after the mark lands in the window. Default: nothing.
  virtual void StopRecording(int64_t window_end_ns) {}
  // `window_end_ns`: records still open are closed at this instant.
  virtual void Stop(int64_t window_end_ns) = 0;
  virtual CollectStats Collect(RecordWriter& writer) = 0;
  virtual void Abort() = 0;
};

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_ACTIVITY_SOURCE_H_
