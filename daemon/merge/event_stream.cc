#include "daemon/merge/event_stream.h"

#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/analysis/micros_text.h"
#include "daemon/analysis/trace_input_chars.h"

namespace gpuctl::merge {
namespace {

constexpr double kMaxMicros = 9e15;
constexpr size_t kMaxDepth = 64;

// Builds each traceEvents element (and each other top-level member) as a
// value of its own and hands it on; the document itself is never built.
class EventSax {
 public:
  EventSax(const std::string& name, const analysis::TraceInputChars& chars,
           const EventVisitor& visit)
      : name_(name), chars_(chars), visit_(visit) {}

  bool null() { return Scalar(Json(nullptr), ""); }
  bool boolean(bool v) { return Scalar(Json(v), ""); }
  bool number_integer(int64_t v) { return Scalar(Json(v), absl::StrCat(v)); }
  bool number_unsigned(uint64_t v) { return Scalar(Json(v), absl::StrCat(v)); }
  bool number_float(double v, const std::string& text) { return Scalar(Json(v), text); }
  bool string(std::string& v) { return Scalar(Json(std::move(v)), ""); }
  bool binary(Json::binary_t& /*v*/) { return Fail("binary values are not JSON"); }
  bool key(std::string& k) {
    if (stack_.empty() && depth_ == 1) {
      root_key_ = k;
    } else {
      key_ = k;
    }
    return true;
  }
  bool start_object(std::size_t /*n*/) { return Start(Json::object()); }
  bool start_array(std::size_t /*n*/) { return Start(Json::array()); }
  bool end_object() { return End(); }
  bool end_array() { return End(); }
  bool parse_error(std::size_t position, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    if (size_t colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    status_ = absl::InvalidArgumentError(absl::StrCat(name_, ": malformed JSON at byte ",
                                                      position > 0 ? position - 1 : 0, ": ", what));
    return false;
  }

  absl::Status Finish() {
    if (!status_.ok()) return status_;
    if (!saw_events_) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": not a trace: the document has no traceEvents array"));
    }
    return absl::OkStatus();
  }
  StreamedHeader& header() { return header_; }

 private:
  bool Fail(absl::string_view why) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat(name_, ": not a trace: ", why, " at byte ", chars_.offset()));
    return false;
  }

  // A value inside the one being built, or a whole top-level one.
  bool Scalar(Json v, const std::string& text) {
    if (!stack_.empty()) {
      if (stack_.size() == 1 && in_events_) {
        if (key_ == "ts") event_.ts_text = text;
        if (key_ == "dur") event_.dur_text = text;
      }
      Json& top = *stack_.back();
      if (top.is_array()) {
        top.push_back(std::move(v));
      } else {
        top[key_] = std::move(v);
      }
      return true;
    }
    if (depth_ == 0) return Fail("the document is not an object");
    if (in_events_) return Fail("a traceEvents element is not an object");
    header_.members[root_key_] = std::move(v);
    return true;
  }

  bool Start(Json v) {
    if (!stack_.empty()) {
      if (stack_.size() >= kMaxDepth) return Fail("nesting deeper than 64 levels");
      Json& top = *stack_.back();
      Json* child = nullptr;
      if (top.is_array()) {
        top.push_back(std::move(v));
        child = &top.back();
      } else {
        child = &(top[key_] = std::move(v));
      }
      stack_.push_back(child);
      return true;
    }
    if (depth_ == 0) {
      if (!v.is_object()) return Fail("the document is not an object");
      depth_ = 1;
      return true;
    }
    if (in_events_) {
      if (!v.is_object()) return Fail("a traceEvents element is not an object");
      event_.value = std::move(v);
      event_.ts_text.clear();
      event_.dur_text.clear();
      stack_.push_back(&event_.value);
      return true;
    }
    if (root_key_ == "traceEvents") {
      if (!v.is_array()) return Fail("traceEvents is not an array");
      if (saw_events_) return Fail("a second traceEvents array");
      in_events_ = saw_events_ = true;
      return true;
    }
    member_ = std::move(v);
    stack_.push_back(&member_);
    return true;
  }

  bool End() {
    if (!stack_.empty()) {
      stack_.pop_back();
      if (!stack_.empty()) return true;
      if (in_events_) {
        ++header_.events;
        if (absl::Status s = visit_(event_); !s.ok()) {
          status_ = std::move(s);
          return false;
        }
        return true;
      }
      header_.members[root_key_] = std::move(member_);
      return true;
    }
    if (in_events_) {
      in_events_ = false;
    } else {
      depth_ = 0;
    }
    return true;
  }

  const std::string& name_;
  const analysis::TraceInputChars& chars_;
  const EventVisitor& visit_;
  absl::Status status_;
  StreamedHeader header_;
  int depth_ = 0;  // 1 inside the root object
  bool in_events_ = false, saw_events_ = false;
  std::string root_key_, key_;
  std::vector<Json*> stack_;  // the value being built, innermost last
  StreamedEvent event_;
  Json member_;
};

}  // namespace

absl::StatusOr<StreamedHeader> StreamTrace(analysis::TraceInput input, const std::string& name,
                                           const EventVisitor& visit) {
  analysis::TraceInputChars chars(&input);
  EventSax sax(name, chars, visit);
  try {
    Json::sax_parse(analysis::TraceInputIterator(&chars), analysis::TraceInputIterator(), &sax,
                    Json::input_format_t::json, /*strict=*/true);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": malformed JSON at byte ", chars.offset(), ": ", e.what()));
  }
  // A gzip error ends the bytes early: name it rather than the JSON's end.
  if (!input.status().ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", input.status().message()));
  }
  if (absl::Status s = sax.Finish(); !s.ok()) return s;
  sax.header().decompressed_bytes = chars.offset();
  return std::move(sax.header());
}

std::string PhaseOf(const Json& event) {
  auto it = event.find("ph");
  return it != event.end() && it->is_string() ? it->get<std::string>() : "";
}

std::optional<int64_t> MicrosTextToNs(const std::string& text) {
  return analysis::MicrosTextToNanos(text, kMaxMicros);
}

}  // namespace gpuctl::merge
