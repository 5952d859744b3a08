#include "daemon/hostctx/host_trace_json.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/convert/json_writer.h"

namespace gpuctl::hostctx {
namespace {

void AppendTime(std::string* out, uint64_t time_ns, uint64_t base_time_ns) {
  daemon::AppendMicrosFromNanos(out, static_cast<int64_t>(time_ns - base_time_ns));
}

// The sample's frames as a JSON array of labels, innermost first, into
// `stack`; returns the innermost label (empty without frames).
std::string AppendStack(std::string* stack, const CpuSample& sample, FrameSymbolizer* symbolizer) {
  std::string top;
  *stack += "[";
  const std::vector<uint64_t> chain = BestCallChain(sample, symbolizer);
  const auto pid = static_cast<pid_t>(sample.pid);
  const uint32_t space = symbolizer->AddressSpaceAt(pid, sample.time_ns);
  for (size_t i = 0; i < chain.size(); ++i) {
    const uint64_t ip = chain[i];
    std::string label = FrameLabel(symbolizer->Symbolize(pid, space, ip, i > 0), ip);
    if (i > 0) *stack += ",";
    daemon::AppendJsonString(stack, label);
    if (i == 0) top = std::move(label);
  }
  *stack += "]";
  return top;
}

void AppendSample(std::string* out, const CpuSample& sample, FrameSymbolizer* symbolizer,
                  uint64_t base_time_ns) {
  std::string stack;
  const std::string top = AppendStack(&stack, sample, symbolizer);
  absl::StrAppend(out, R"({"ph":"i","s":"t","cat":"cpu_sample","name":)");
  daemon::AppendJsonString(out, top.empty() ? "[no frames]" : top);
  absl::StrAppend(out, R"(,"pid":)", sample.pid, R"(,"tid":)", sample.tid, R"(,"ts":)");
  AppendTime(out, sample.time_ns, base_time_ns);
  absl::StrAppend(out, R"(,"args":{"stack":)", stack, "}}");
}

void AppendOffCpu(std::string* out, const OffCpuInterval& interval, const HostCapture& capture,
                  FrameSymbolizer* symbolizer, uint64_t base_time_ns) {
  const absl::string_view reason = OffCpuReasonName(interval.reason);
  absl::StrAppend(out, R"json({"ph":"X","cat":"off_cpu","name":"off_cpu ()json", reason,
                  R"json()","pid":)json", interval.pid, R"(,"tid":)", interval.tid, R"(,"ts":)");
  AppendTime(out, interval.start_ns, base_time_ns);
  absl::StrAppend(out, R"(,"dur":)");
  daemon::AppendMicrosFromNanos(out, static_cast<int64_t>(interval.end_ns - interval.start_ns));
  absl::StrAppend(out, R"(,"args":{"reason":")", reason, R"(")");
  if (interval.stack >= 0 && static_cast<size_t>(interval.stack) < capture.switch_stacks.size()) {
    absl::StrAppend(out, R"(,"stack":)");
    AppendStack(out, capture.switch_stacks[static_cast<size_t>(interval.stack)], symbolizer);
  }
  if (interval.preempted_by != 0) {
    // The comm and pid only: another user's command line is not exposed.
    auto name = capture.preemptor_names.find(interval.preempted_by);
    absl::StrAppend(out, R"(,"preempted_by":)");
    daemon::AppendJsonString(
        out, name == capture.preemptor_names.end()
                 ? absl::StrCat("pid ", interval.preempted_by)
                 : absl::StrCat(name->second, " (pid ", interval.preempted_by, ")"));
  }
  absl::StrAppend(out, "}}");
}

void AppendName(std::string* out, absl::string_view kind, pid_t pid, pid_t tid,
                absl::string_view name) {
  absl::StrAppend(out, R"({"ph":"M","name":")", kind, R"(","pid":)", pid, R"(,"tid":)", tid,
                  R"(,"args":{"name":)");
  daemon::AppendJsonString(out, name);
  absl::StrAppend(out, "}}");
}

void WriteNames(const HostCapture& capture, std::string* event,
                absl::FunctionRef<void(absl::string_view)> sink) {
  absl::flat_hash_set<pid_t> named(capture.roots.begin(), capture.roots.end());
  for (const SampledThread& thread : capture.threads) {
    if (!thread.process_name.empty() && named.insert(thread.pid).second) {
      event->clear();
      AppendName(event, "process_name", thread.pid, 0, thread.process_name);
      sink(*event);
    }
    if (!thread.name.empty()) {
      event->clear();
      AppendName(event, "thread_name", thread.pid, thread.tid, thread.name);
      sink(*event);
    }
  }
}

}  // namespace

void WriteHostContextEvents(const HostCapture& capture, absl::Span<const OffCpuInterval> off_cpu,
                            FrameSymbolizer* symbolizer, uint64_t base_time_ns,
                            absl::FunctionRef<void(absl::string_view)> sink) {
  std::string event;
  WriteNames(capture, &event, sink);
  for (const CpuSample& sample : capture.samples) {
    event.clear();
    AppendSample(&event, sample, symbolizer, base_time_ns);
    sink(event);
  }
  for (const OffCpuInterval& interval : off_cpu) {
    event.clear();
    AppendOffCpu(&event, interval, capture, symbolizer, base_time_ns);
    sink(event);
  }
}

std::string HostContextTraceJson(const HostCapture& capture,
                                 absl::Span<const OffCpuInterval> off_cpu,
                                 FrameSymbolizer* symbolizer, uint64_t base_time_ns) {
  std::string out = "{\"traceEvents\":[";
  bool first = true;
  WriteHostContextEvents(capture, off_cpu, symbolizer, base_time_ns, [&](absl::string_view event) {
    absl::StrAppend(&out, first ? "\n" : ",\n", event);
    first = false;
  });
  absl::StrAppend(
      &out, "],\n\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":", base_time_ns,
      ",\"gpuctl\":{\"window_start_ns\":", capture.start_ns, ",\"window_end_ns\":", capture.stop_ns,
      ",\"cpu_samples\":", capture.samples.size(), ",\"threads_sampled\":", capture.threads.size(),
      ",\"lost_records\":", capture.lost_records, ",\"dropped_samples\":", capture.dropped_samples,
      ",\"dropped_switches\":", capture.dropped_switches,
      ",\"corrupt_records\":", capture.corrupt_records, "}}\n");
  return out;
}

}  // namespace gpuctl::hostctx
