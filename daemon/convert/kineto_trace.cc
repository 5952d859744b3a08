#include "daemon/convert/kineto_trace.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/excerpt.h"
#include "daemon/convert/gzip.h"
#include "daemon/convert/json_writer.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {
namespace {

using SaxJson = nlohmann::json;

// An input iterator over the file that mirrors its position into `*mirror`
// as the parser advances, so that the handler can name the byte offset of
// what it rejects (the parser itself reports offsets only for syntax).
class TrackedIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedIterator(const char* p, const char** mirror) : p_(p), mirror_(mirror) {}
  reference operator*() const { return *p_; }
  TrackedIterator& operator++() {
    ++p_;
    if (mirror_ != nullptr) *mirror_ = p_;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedIterator& other) const { return p_ == other.p_; }
  bool operator!=(const TrackedIterator& other) const { return p_ != other.p_; }

 private:
  const char* p_;
  const char** mirror_;
};

// Compact JSON text accumulated and handed to the gzip stream in pieces.
class GzipSink {
 public:
  explicit GzipSink(GzipEncoder* gzip) : gzip_(gzip) {}
  std::string& text() { return text_; }
  absl::Status MaybeFlush() {
    if (text_.size() < kFlushBytes) return absl::OkStatus();
    absl::Status s = gzip_->Append(text_);
    text_.clear();
    return s;
  }
  absl::Status Finish() {
    absl::Status s = gzip_->Append(text_);
    text_.clear();
    if (!s.ok()) return s;
    return gzip_->Finish();
  }

 private:
  static constexpr size_t kFlushBytes = 256 << 10;
  GzipEncoder* gzip_;
  std::string text_;
};

// What one traceEvents element said about itself.
struct EventFields {
  bool has_ph = false, metadata = false, has_ts = false, has_dur = false;
  double ts_us = 0, dur_us = 0;
  bool cpu_op = false, kernel = false;
  bool profiler_span = false;  // `cat` "Trace": kineto's span of its window
  // PyTorch's range around each optimizer.step(), what kineto counts as an
  // iteration: `cat` "user_annotation", name "Optimizer.step#<class>.step".
  bool user_annotation = false, optimizer_step_name = false;
};

// The top-level members the handler reads, not only copies.
enum class TopKey { kOther, kGpuctl, kTraceEvents, kBaseTime, kTraceId, kDistributedInfo };

TopKey ClassifyTopKey(absl::string_view key) {
  if (key == "gpuctl") return TopKey::kGpuctl;
  if (key == "traceEvents") return TopKey::kTraceEvents;
  if (key == "baseTimeNanoseconds") return TopKey::kBaseTime;
  if (key == "trace_id") return TopKey::kTraceId;
  if (key == "distributedInfo") return TopKey::kDistributedInfo;
  return TopKey::kOther;
}

// nlohmann-json SAX handler: validates the kineto shape while re-emitting
// every value (except a file's own top-level `gpuctl`) into the sink.
// Nesting levels: 1 the top object, 2 the traceEvents array, 3 an event.
class KinetoSax {
 public:
  KinetoSax(const char* begin, const char* const* cursor, const KinetoTraceTag& tag, GzipSink* sink)
      : begin_(begin), cursor_(cursor), tag_(tag), sink_(sink), out_(sink->text()) {}

  bool null() {
    return Literal() && Scalar([&] { out_ += "null"; });
  }
  bool boolean(bool v) {
    return Literal() && Scalar([&] { out_ += v ? "true" : "false"; });
  }
  bool number_integer(SaxJson::number_integer_t v) {
    return Number(static_cast<double>(v)) && Scalar([&] { absl::StrAppend(&out_, v); });
  }
  bool number_unsigned(SaxJson::number_unsigned_t v) {
    if (depth() == 1 && pending_top_ == TopKey::kBaseTime &&
        v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      base_time_ns_ = static_cast<int64_t>(v);
      base_time_ok_ = true;
    }
    return Number(static_cast<double>(v)) && Scalar([&] { absl::StrAppend(&out_, v); });
  }
  bool number_float(SaxJson::number_float_t v, const std::string& text) {
    return Number(v) && Scalar([&] { out_ += text; });
  }
  bool string(std::string& v) {
    if (!StringValue(v)) return false;
    return Scalar([&] { AppendJsonString(&out_, v); });
  }
  bool binary(SaxJson::binary_t& /*v*/) { return Fail("binary value"); }
  bool start_object(size_t /*elements*/) { return StartContainer(/*object=*/true); }
  bool start_array(size_t /*elements*/) { return StartContainer(/*object=*/false); }
  bool end_object() { return EndContainer(); }
  bool end_array() { return EndContainer(); }
  bool key(std::string& k);
  bool parse_error(size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex);

  // After a successful parse: the checks that need the whole file, and the
  // closing members.
  absl::Status Finish(KinetoTraceSummary* summary);
  const absl::Status& status() const { return status_; }

 private:
  struct Frame {
    bool object = false;
    bool has_members = false;
  };

  size_t Offset() const { return static_cast<size_t>(*cursor_ - begin_); }
  bool Fail(absl::string_view what) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("not a kineto trace: ", what, " at byte ", Offset()));
    }
    return false;
  }
  bool InEventMember() const { return depth() == 3 && in_events_; }
  size_t depth() const { return stack_.size(); }

  template <typename EmitFn>
  bool Scalar(EmitFn emit);
  bool Number(double v);
  bool Literal();
  bool IsEventField() const {
    return InEventMember() && skip_depth_ == 0 &&
           (event_key_ == "ph" || event_key_ == "ts" || event_key_ == "dur" || event_key_ == "cat");
  }
  bool StringValue(const std::string& v);
  bool StartContainer(bool object);
  bool EndContainer();
  bool EndEvent();
  void BeginValue();
  void AppendTag();

  const char* begin_;
  const char* const* cursor_;
  const KinetoTraceTag& tag_;
  GzipSink* sink_;
  std::string& out_;
  absl::Status status_;

  std::vector<Frame> stack_;
  bool done_ = false;                    // the top-level object has closed
  size_t skip_depth_ = 0;                // > 0: inside a dropped value
  bool skip_next_ = false;               // the next value is dropped
  TopKey pending_top_ = TopKey::kOther;  // the key whose value comes next (level 1)
  bool base_time_ok_ = false;
  bool seen_events_ = false, in_events_ = false, has_distributed_info_ = false;
  std::string event_key_;  // the key whose value comes next (level 3)
  EventFields event_;

  KinetoTraceSummary summary_;
  int64_t base_time_ns_ = 0;
  double first_us_ = std::numeric_limits<double>::infinity();
  double last_us_ = -std::numeric_limits<double>::infinity();
  double span_first_us_ = std::numeric_limits<double>::infinity();
  double span_last_us_ = -std::numeric_limits<double>::infinity();
};

void KinetoSax::BeginValue() {
  if (stack_.empty()) return;
  Frame& top = stack_.back();
  if (top.object) return;  // key() wrote the separator
  if (top.has_members) out_ += ',';
  if (depth() == 2 && in_events_) out_ += '\n';
  top.has_members = true;
}

template <typename EmitFn>
bool KinetoSax::Scalar(EmitFn emit) {
  if (stack_.empty()) return Fail("the top level is not an object");
  if (depth() == 2 && in_events_) return Fail("a traceEvents element is not an object");
  if (depth() == 1) {
    if (pending_top_ == TopKey::kTraceEvents) return Fail("traceEvents is not an array");
    if (pending_top_ == TopKey::kBaseTime && !base_time_ok_) {
      return Fail("baseTimeNanoseconds is not a non-negative integer");
    }
    pending_top_ = TopKey::kOther;
  }
  if (skip_depth_ > 0) return true;
  if (skip_next_) {
    skip_next_ = false;
    return true;
  }
  BeginValue();
  emit();
  if (!sink_->MaybeFlush().ok()) return Fail("compression failed");
  return true;
}

bool KinetoSax::Literal() {
  if (!IsEventField()) return true;
  return Fail(
      absl::StrCat("event ", summary_.event_count, ": \"", event_key_, "\" is null or a boolean"));
}

bool KinetoSax::Number(double v) {
  if (!IsEventField()) return true;
  if (event_key_ == "ts") {
    event_.has_ts = true;
    event_.ts_us = v;
  } else if (event_key_ == "dur") {
    event_.has_dur = true;
    event_.dur_us = v;
  } else if (event_key_ == "ph" || event_key_ == "cat") {
    return Fail(
        absl::StrCat("event ", summary_.event_count, ": \"", event_key_, "\" is not a string"));
  }
  return true;
}

bool KinetoSax::StringValue(const std::string& v) {
  if (depth() == 1) {
    if (pending_top_ == TopKey::kTraceId) summary_.trace_id_in_file = v;
    return true;
  }
  if (InEventMember() && skip_depth_ == 0 && event_key_ == "name") {
    // Read, never required: a name of any type passes as before.
    event_.optimizer_step_name = absl::StartsWith(v, kOptimizerStepPrefix);
    return true;
  }
  if (!IsEventField()) return true;
  if (event_key_ == "ph") {
    if (v.size() != 1) {
      return Fail(absl::StrCat("event ", summary_.event_count, ": \"ph\" is not one letter"));
    }
    event_.has_ph = true;
    event_.metadata = v == "M";
  } else if (event_key_ == "cat") {
    event_.cpu_op = v == "cpu_op";
    event_.kernel = v == "kernel";
    event_.profiler_span = v == "Trace";
    event_.user_annotation = v == "user_annotation";
  } else if (event_key_ == "ts" || event_key_ == "dur") {
    return Fail(
        absl::StrCat("event ", summary_.event_count, ": \"", event_key_, "\" is not a number"));
  }
  return true;
}

bool KinetoSax::key(std::string& k) {
  if (skip_depth_ > 0) return true;
  if (depth() == 1) {
    pending_top_ = ClassifyTopKey(k);
    switch (pending_top_) {
      case TopKey::kGpuctl:
        skip_next_ = true;
        return true;  // dropped with its value: no separator, no key
      case TopKey::kTraceEvents:
        if (seen_events_) return Fail("a second traceEvents");
        seen_events_ = true;
        break;
      case TopKey::kDistributedInfo:
        has_distributed_info_ = true;
        break;
      case TopKey::kBaseTime:
        base_time_ok_ = false;
        break;
      default:
        break;
    }
  } else if (InEventMember()) {
    event_key_ = k;
  }
  Frame& top = stack_.back();
  if (top.has_members) out_ += ',';
  top.has_members = true;
  AppendJsonString(&out_, k);
  out_ += ':';
  return true;
}

bool KinetoSax::StartContainer(bool object) {
  if (done_) return Fail("content after the top-level object");
  if (stack_.empty() && !object) return Fail("the top level is not an object");
  if (depth() >= static_cast<size_t>(kMaxKinetoTraceDepth)) {
    return Fail(absl::StrCat("nesting deeper than ", kMaxKinetoTraceDepth));
  }
  if (depth() == 1) {
    if (pending_top_ == TopKey::kTraceEvents) {
      if (object) return Fail("traceEvents is not an array");
      in_events_ = true;
    } else if (pending_top_ == TopKey::kBaseTime) {
      return Fail("baseTimeNanoseconds is not a number");
    }
    pending_top_ = TopKey::kOther;
  } else if (depth() == 2 && in_events_) {
    if (!object) return Fail("a traceEvents element is not an object");
    event_ = EventFields{};
  } else if (IsEventField()) {
    return Fail(
        absl::StrCat("event ", summary_.event_count, ": \"", event_key_, "\" is not a scalar"));
  }
  if (skip_depth_ > 0 || skip_next_) {
    skip_next_ = false;
    ++skip_depth_;
    stack_.push_back(Frame{object, false});
    return true;
  }
  BeginValue();
  stack_.push_back(Frame{object, false});
  out_ += object ? '{' : '[';
  if (depth() == 1) AppendTag();
  return true;
}

bool KinetoSax::EndContainer() {
  bool event_end = depth() == 3 && in_events_;
  bool events_end = depth() == 2 && in_events_;
  bool object = stack_.back().object;
  stack_.pop_back();
  if (event_end && !EndEvent()) return false;
  if (events_end) in_events_ = false;
  if (skip_depth_ > 0) {
    --skip_depth_;
    return true;
  }
  if (events_end) out_ += '\n';
  if (stack_.empty()) {
    done_ = true;
    return true;  // Finish() closes the top level
  }
  out_ += object ? '}' : ']';
  if (!sink_->MaybeFlush().ok()) return Fail("compression failed");
  return true;
}

bool KinetoSax::EndEvent() {
  const uint64_t index = summary_.event_count++;
  if (!event_.has_ph) return Fail(absl::StrCat("event ", index, " has no \"ph\""));
  if (event_.metadata) return true;
  if (!event_.has_ts) return Fail(absl::StrCat("event ", index, " has no \"ts\""));
  if (!std::isfinite(event_.ts_us) || std::fabs(event_.ts_us) > 9e12 ||
      !std::isfinite(event_.dur_us) || std::fabs(event_.dur_us) > 9e12) {
    return Fail(absl::StrCat("event ", index, ": \"ts\" or \"dur\" out of range"));
  }
  summary_.cpu_op_count += event_.cpu_op;
  summary_.kernel_count += event_.kernel;
  summary_.optimizer_steps += event_.user_annotation && event_.optimizer_step_name;
  if (event_.profiler_span && event_.has_dur && event_.dur_us >= 0) {
    span_first_us_ = std::min(span_first_us_, event_.ts_us);
    span_last_us_ = std::max(span_last_us_, event_.ts_us + event_.dur_us);
  }
  first_us_ = std::min(first_us_, event_.ts_us);
  last_us_ = std::max(last_us_, event_.ts_us + (event_.has_dur ? std::max(0.0, event_.dur_us) : 0));
  return true;
}

void KinetoSax::AppendTag() {
  out_ += "\"gpuctl\": {\"trace_id\": ";
  AppendJsonString(&out_, tag_.trace_id);
  out_ += ", \"host\": ";
  AppendJsonString(&out_, tag_.host);
  if (tag_.rank >= 0) absl::StrAppend(&out_, ", \"rank\": ", tag_.rank);
  absl::StrAppend(&out_, ", \"pid\": ", tag_.pid, ", \"job_id\": ");
  AppendJsonString(&out_, tag_.job_id);
  out_ += "}\n";
  stack_.back().has_members = true;
}

bool KinetoSax::parse_error(size_t position, const std::string& last_token,
                            const nlohmann::detail::exception& ex) {
  if (!status_.ok()) return false;  // the handler stopped the parse
  std::string what = ex.what();
  // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax
  // error ...; last read: '...'": keep the reason, quote the token bounded.
  size_t colon = what.find(": ");
  if (colon != std::string::npos) what.erase(0, colon + 2);
  size_t last_read = what.find("; last read");
  if (last_read != std::string::npos) what.erase(last_read);
  status_ = absl::InvalidArgumentError(
      absl::StrCat("malformed JSON at byte ", position == 0 ? 0 : position - 1, ": ",
                   Excerpt(what, 200), " (near '", Excerpt(last_token), "')"));
  return false;
}

absl::Status KinetoSax::Finish(KinetoTraceSummary* summary) {
  if (!done_) return absl::InvalidArgumentError("not a kineto trace: no top-level object");
  if (!seen_events_) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a kineto trace: no traceEvents array (at byte ", Offset(), ")"));
  }
  if (!has_distributed_info_ && tag_.rank >= 0) {
    absl::StrAppend(&out_, ",\n\"distributedInfo\": {\"rank\": ", tag_.rank, "}");
  }
  out_ += "}\n";
  if (first_us_ <= last_us_) {
    summary_.first_ts_unix_ns = base_time_ns_ + std::llround(first_us_ * 1000.0);
    summary_.last_ts_unix_ns = base_time_ns_ + std::llround(last_us_ * 1000.0);
  }
  if (span_first_us_ <= span_last_us_) {
    summary_.window_start_unix_ns = base_time_ns_ + std::llround(span_first_us_ * 1000.0);
    summary_.window_end_unix_ns = base_time_ns_ + std::llround(span_last_us_ * 1000.0);
  }
  *summary = std::move(summary_);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KinetoConverted> ConvertKinetoTrace(absl::string_view json,
                                                   const KinetoTraceTag& tag, int gzip_level) {
  if (json.size() > kMaxKinetoTraceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("kineto trace of ", json.size(), " bytes is over the limit of ",
                     kMaxKinetoTraceBytes, " at byte ", kMaxKinetoTraceBytes));
  }
  auto gzip = GzipEncoder::Create(gzip_level);
  if (!gzip.ok()) return gzip.status();
  GzipSink sink(gzip->get());
  const char* cursor = json.data();
  KinetoSax sax(json.data(), &cursor, tag, &sink);
  bool parsed = false;
  try {
    parsed = SaxJson::sax_parse(TrackedIterator(json.data(), &cursor),
                                TrackedIterator(json.data() + json.size(), nullptr), &sax);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON at byte ", cursor - json.data(), ": ", Excerpt(e.what())));
  }
  if (!parsed) {
    if (!sax.status().ok()) return sax.status();
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON at byte ", cursor - json.data()));
  }
  KinetoConverted converted;
  if (absl::Status s = sax.Finish(&converted.summary); !s.ok()) return s;
  if (absl::Status s = sink.Finish(); !s.ok()) return s;
  converted.gzip = (*gzip)->TakeOutput();
  return converted;
}

}  // namespace gpuctl::daemon
