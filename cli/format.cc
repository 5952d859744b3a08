#include "cli/format.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace gpuctl::cli {

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  // Round first so 1023.97 KiB reads "1.0 MiB", not "1024.0 KiB".
  while (value >= 1023.95 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string StatusWord(v1::CaptureStatus status) {
  switch (status) {
    case v1::CAPTURE_STATUS_OK:
      return "ok";
    case v1::CAPTURE_STATUS_BUSY:
      return "busy";
    case v1::CAPTURE_STATUS_UNAVAILABLE:
      return "unavailable";
    case v1::CAPTURE_STATUS_FAILED:
      return "failed";
    case v1::CAPTURE_STATUS_TIMED_OUT:
      return "timed out";
    case v1::CAPTURE_STATUS_EXITED:
      return "exited";
    case v1::CAPTURE_STATUS_LOST:
      return "lost";
    case v1::CAPTURE_STATUS_REJECTED:
      return "rejected";
    default:
      return absl::StrCat("unknown (", static_cast<int>(status), ")");
  }
}

std::string PhaseWord(v1::ProcessPhase phase) {
  switch (phase) {
    case v1::PROCESS_PHASE_REQUESTED:
      return "requested";
    case v1::PROCESS_PHASE_CAPTURING:
      return "capturing";
    case v1::PROCESS_PHASE_PROCESSING:
      return "processing";
    default:
      return "waiting";
  }
}

std::string CaptureStateWord(v1::CaptureState state) {
  switch (state) {
    case v1::CAPTURE_STATE_IDLE:
      return "idle";
    case v1::CAPTURE_STATE_ARMED:
      return "armed";
    case v1::CAPTURE_STATE_CAPTURING:
      return "capturing";
    case v1::CAPTURE_STATE_COLLECTING:
      return "collecting";
    default:
      return "-";
  }
}

std::string RankText(int32_t rank) { return rank < 0 ? "-" : absl::StrCat(rank); }

std::string Printable(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

std::string Shorten(std::string text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  if (max_chars <= 3) return text.substr(0, max_chars);
  return absl::StrCat(text.substr(0, max_chars - 3), "...");
}

std::string CommandText(const google::protobuf::RepeatedPtrField<std::string>& argv,
                        size_t max_chars) {
  std::vector<absl::string_view> words(argv.begin(), argv.end());
  if (!words.empty()) {
    const size_t slash = words[0].rfind('/');
    if (slash != absl::string_view::npos && slash + 1 < words[0].size()) {
      words[0].remove_prefix(slash + 1);
    }
  }
  std::string joined = Printable(absl::StrJoin(words, " "));
  if (joined.empty()) return "-";
  return max_chars == 0 ? joined : Shorten(std::move(joined), max_chars);
}

std::string RoleWord(v1::ProcessRole role) {
  switch (role) {
    case v1::PROCESS_ROLE_WORKER:
      return "worker";
    case v1::PROCESS_ROLE_LAUNCHER:
      return "launcher";
    case v1::PROCESS_ROLE_HELPER:
      return "helper";
    default:
      return "-";
  }
}

std::string TimestampText(const google::protobuf::Timestamp& ts, absl::TimeZone zone) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "-";
  absl::Time t = absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", t, zone);
}

namespace {

std::string ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  // Printing a well-formed message cannot fail; an empty object is the
  // least surprising output if it ever does.
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) json = "{}";
  return json;
}

// Protobuf prints a map (a Struct's fields, a message's map fields) in its
// hash order, which changes from run to run: objects are printed here with
// their keys sorted, scalars as protobuf prints them.
void AppendSortedJson(const google::protobuf::Value& value, std::string* out) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kStructValue: {
      std::vector<const google::protobuf::MapPair<std::string, google::protobuf::Value>*> fields;
      for (const auto& field : value.struct_value().fields()) fields.push_back(&field);
      std::sort(fields.begin(), fields.end(),
                [](const auto* a, const auto* b) { return a->first < b->first; });
      out->push_back('{');
      for (size_t i = 0; i < fields.size(); ++i) {
        if (i > 0) out->push_back(',');
        google::protobuf::Value key;
        key.set_string_value(fields[i]->first);
        absl::StrAppend(out, ProtoJson(key), ":");
        AppendSortedJson(fields[i]->second, out);
      }
      out->push_back('}');
      return;
    }
    case google::protobuf::Value::kListValue: {
      out->push_back('[');
      const auto& values = value.list_value().values();
      for (int i = 0; i < values.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendSortedJson(values[i], out);
      }
      out->push_back(']');
      return;
    }
    default:
      out->append(ProtoJson(value));
  }
}

}  // namespace

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::Value value;
  if (!google::protobuf::util::JsonStringToMessage(ProtoJson(message), &value).ok()) return "{}";
  std::string json;
  AppendSortedJson(value, &json);
  return json;
}

void SetJsonValue(google::protobuf::Value* value, const google::protobuf::Message& message) {
  // Round-trips the JSON mapping; cannot fail for a message just printed.
  (void)google::protobuf::util::JsonStringToMessage(ProtoJson(message), value);
}

Table::Table(std::vector<std::string> headers, std::vector<bool> numeric)
    : headers_(std::move(headers)), numeric_(std::move(numeric)) {
  numeric_.resize(headers_.size(), false);
}

void Table::AddRow(std::vector<std::string> cells, std::string note) {
  cells.resize(headers_.size());
  rows_.push_back(Row{std::move(cells), std::move(note)});
}

void Table::Render(std::ostream& out) const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const Row& row : rows_) {
    for (size_t c = 0; c < row.cells.size(); ++c)
      width[c] = std::max(width[c], row.cells[c].size());
  }
  auto print_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) line += "  ";
      size_t pad = width[c] - cells[c].size();
      if (numeric_[c]) line.append(pad, ' ');
      line += cells[c];
      if (!numeric_[c] && c + 1 < cells.size()) line.append(pad, ' ');
    }
    out << line << "\n";
  };
  print_line(headers_);
  for (const Row& row : rows_) {
    print_line(row.cells);
    if (!row.note.empty()) out << "    " << row.note << "\n";
  }
}

}  // namespace gpuctl::cli
