#ifndef GPUCTL_DAEMON_HOSTCTX_HOST_TRACE_JSON_H_
#define GPUCTL_DAEMON_HOSTCTX_HOST_TRACE_JSON_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "daemon/hostctx/off_cpu.h"
#include "daemon/hostctx/sampler.h"
#include "daemon/hostctx/symbolizer.h"

namespace gpuctl::hostctx {

// A capture's samples and off-CPU intervals as Chrome trace events in the
// layout of gpuctl's trace files (docs/trace-format.md: `ts`/`dur` in
// microseconds with three decimals from `base_time_ns`, rows pid/tid):
//  - one instant event per sample, `"cat": "cpu_sample"`, named after its
//    innermost frame, `args.stack` the frames innermost first;
//  - one complete event per off-CPU interval, `"cat": "off_cpu"`, named
//    `off_cpu (<reason>)`, `args.reason` blocked / preempted / unknown.
//  - metadata naming the rows: `thread_name` for every sampled thread, and
//    `process_name` for every sampled process other than the capture's
//    roots (those are the traced processes, which their own trace names),
//    so helper processes get tracks of their own.
// Each event is handed to `sink` as one JSON object (no separator):
// metadata first, then samples, then intervals.
void WriteHostContextEvents(const HostCapture& capture, absl::Span<const OffCpuInterval> off_cpu,
                            FrameSymbolizer* symbolizer, uint64_t base_time_ns,
                            absl::FunctionRef<void(absl::string_view)> sink);

// The same events as a standalone trace file: {"traceEvents": [...],
// "displayTimeUnit": "ms", "baseTimeNanoseconds": N, "gpuctl": {counts}}.
std::string HostContextTraceJson(const HostCapture& capture,
                                 absl::Span<const OffCpuInterval> off_cpu,
                                 FrameSymbolizer* symbolizer, uint64_t base_time_ns);

}  // namespace gpuctl::hostctx

#endif  // GPUCTL_DAEMON_HOSTCTX_HOST_TRACE_JSON_H_
