#include "daemon/merge/event_stream.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/analysis/micros_text.h"
#include "daemon/analysis/trace_json_stream.h"
#include "simdjson.h"

namespace gpuctl::merge {
namespace {

namespace od = simdjson::ondemand;

constexpr double kMaxMicros = 9e15;
// Containers deeper than this in an event or a top-level member are
// refused: the values are built recursively.
constexpr int kMaxDepth = 64;

// A number as nlohmann's parser builds one (the sinks write a value by its
// type: Perfetto's uint_value or int_value): a negative integer as int64, a
// non-negative one as uint64, a fraction, an exponent or an integer past 64
// bits as a double. `*text` is the number as written.
simdjson::error_code NumberToJson(od::value v, Json* out, std::string_view* text) {
  const std::string_view raw = analysis::TokenText(v);
  *text = raw;
  if (raw.find_first_of(".eE") == std::string_view::npos) {
    if (!raw.empty() && raw[0] == '-') {
      int64_t i = 0;
      if (v.get_int64().get(i) == simdjson::SUCCESS) {
        *out = i;
        return simdjson::SUCCESS;
      }
    } else {
      uint64_t u = 0;
      if (v.get_uint64().get(u) == simdjson::SUCCESS) {
        *out = u;
        return simdjson::SUCCESS;
      }
    }
  }
  double d = 0;  // an integer past 64 bits; an error for text that is no number
  GPUCTL_JSON_TRY(v.get_double().get(d));
  *out = d;
  return simdjson::SUCCESS;
}

// Builds each traceEvents element (and each other top-level member) as an
// ordered_json of its own and hands it on; the document itself is never
// built.
class MergeJsonVisitor final : public analysis::TraceJsonVisitor {
 public:
  MergeJsonVisitor(const std::string& name, const EventVisitor& visit)
      : name_(name), visit_(visit) {}

  simdjson::error_code OnTopMember(std::string_view key, od::value value) override {
    Json member;
    GPUCTL_JSON_TRY(ToJson(value, 1, &member, nullptr));
    header_.members[std::string(key)] = std::move(member);
    return simdjson::SUCCESS;
  }
  simdjson::error_code OnEvent(od::object event) override;
  void SaveTop() override { saved_members_ = header_.members; }
  void RestoreTop() override { header_.members = std::move(saved_members_); }
  absl::Status Stopped() const override { return stopped_; }

  StreamedHeader& header() { return header_; }

 private:
  // `v` into `*out`; `depth` counts the containers around it and `v`
  // itself. `number_text`, when given, is set to a number's text as written
  // (and cleared for other values).
  simdjson::error_code ToJson(od::value v, int depth, Json* out, std::string* number_text);
  simdjson::error_code ObjectToJson(od::object object, int depth, Json* out);
  simdjson::error_code ArrayToJson(od::array array, int depth, Json* out);
  simdjson::error_code Stop(absl::Status status) {
    stopped_ = std::move(status);
    return simdjson::UNEXPECTED_ERROR;  // the stream asks Stopped() why
  }

  const std::string& name_;
  const EventVisitor& visit_;
  StreamedHeader header_;
  Json saved_members_;
  StreamedEvent event_;
  absl::Status stopped_;
};

simdjson::error_code MergeJsonVisitor::OnEvent(od::object event) {
  // Built apart from event_ until the element is read to its end: an
  // element whose piece ended early comes again, and visit_ sees it once.
  Json value = Json::object();
  std::string ts_text, dur_text;
  for (auto member : event) {
    GPUCTL_JSON_TRY(member.error());
    od::field& field = analysis::FieldOf(member);
    std::string_view key;
    GPUCTL_JSON_TRY(analysis::KeyOf(field, &key));
    std::string* text = nullptr;
    if (analysis::Is(key, "ts")) text = &ts_text;
    if (analysis::Is(key, "dur")) text = &dur_text;
    Json v;
    GPUCTL_JSON_TRY(ToJson(field.value(), 2, &v, text));
    value[std::string(key)] = std::move(v);
  }
  event_.value = std::move(value);
  event_.ts_text = std::move(ts_text);
  event_.dur_text = std::move(dur_text);
  ++header_.events;
  if (absl::Status s = visit_(event_); !s.ok()) return Stop(std::move(s));
  return simdjson::SUCCESS;
}

simdjson::error_code MergeJsonVisitor::ToJson(od::value v, int depth, Json* out,
                                              std::string* number_text) {
  if (number_text != nullptr) number_text->clear();
  od::json_type type;
  GPUCTL_JSON_TRY(v.type().get(type));
  switch (type) {
    case od::json_type::object:
    case od::json_type::array: {
      if (depth > kMaxDepth) {
        return Stop(absl::InvalidArgumentError(
            absl::StrCat(name_, ": not a trace: nesting deeper than ", kMaxDepth,
                         " levels at byte ", OffsetOf(v.raw_json_token().data()))));
      }
      if (type == od::json_type::object) {
        od::object object;
        GPUCTL_JSON_TRY(v.get_object().get(object));
        return ObjectToJson(object, depth, out);
      }
      od::array array;
      GPUCTL_JSON_TRY(v.get_array().get(array));
      return ArrayToJson(array, depth, out);
    }
    case od::json_type::string: {
      std::string_view s;
      GPUCTL_JSON_TRY(v.get_string().get(s));
      *out = std::string(s);
      return simdjson::SUCCESS;
    }
    case od::json_type::number: {
      std::string_view text;
      GPUCTL_JSON_TRY(NumberToJson(v, out, &text));
      if (number_text != nullptr) number_text->assign(text.data(), text.size());
      return simdjson::SUCCESS;
    }
    case od::json_type::boolean: {
      bool b = false;
      GPUCTL_JSON_TRY(v.get_bool().get(b));
      *out = b;
      return simdjson::SUCCESS;
    }
    case od::json_type::null: {
      bool null = false;
      GPUCTL_JSON_TRY(v.is_null().get(null));
      if (!null) return simdjson::N_ATOM_ERROR;
      *out = nullptr;
      return simdjson::SUCCESS;
    }
  }
  return simdjson::INCORRECT_TYPE;
}

simdjson::error_code MergeJsonVisitor::ObjectToJson(od::object object, int depth, Json* out) {
  *out = Json::object();
  for (auto member : object) {
    GPUCTL_JSON_TRY(member.error());
    od::field& field = analysis::FieldOf(member);
    std::string_view key;
    GPUCTL_JSON_TRY(analysis::KeyOf(field, &key));
    Json v;
    GPUCTL_JSON_TRY(ToJson(field.value(), depth + 1, &v, nullptr));
    (*out)[std::string(key)] = std::move(v);
  }
  return simdjson::SUCCESS;
}

simdjson::error_code MergeJsonVisitor::ArrayToJson(od::array array, int depth, Json* out) {
  *out = Json::array();
  for (auto element : array) {
    od::value e;
    GPUCTL_JSON_TRY(element.get(e));
    Json v;
    GPUCTL_JSON_TRY(ToJson(e, depth + 1, &v, nullptr));
    out->push_back(std::move(v));
  }
  return simdjson::SUCCESS;
}

}  // namespace

absl::StatusOr<StreamedHeader> StreamTrace(analysis::TraceInput input, const std::string& name,
                                           const EventVisitor& visit) {
  return StreamTraceInPieces(std::move(input), name, visit, analysis::kTracePieceBytes);
}

absl::StatusOr<StreamedHeader> StreamTraceInPieces(analysis::TraceInput input,
                                                   const std::string& name,
                                                   const EventVisitor& visit, size_t piece_bytes) {
  MergeJsonVisitor visitor(name, visit);
  absl::Status parsed = analysis::StreamTraceJson(&input, &visitor, piece_bytes);
  // A gzip error ends the bytes early: name it rather than the JSON's end.
  if (!input.status().ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", input.status().message()));
  }
  if (!visitor.Stopped().ok()) return visitor.Stopped();
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(name, ": ", parsed.message()));
  visitor.header().decompressed_bytes = input.bytes_read();
  return std::move(visitor.header());
}

std::string PhaseOf(const Json& event) {
  auto it = event.find("ph");
  return it != event.end() && it->is_string() ? it->get<std::string>() : "";
}

std::optional<int64_t> MicrosTextToNs(const std::string& text) {
  return analysis::MicrosTextToNanos(text, kMaxMicros);
}

}  // namespace gpuctl::merge
