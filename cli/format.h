#ifndef GPUCTL_CLI_FORMAT_H_
#define GPUCTL_CLI_FORMAT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "gpuctl/v1/common.pb.h"
#include "gpuctl/v1/service.pb.h"

namespace gpuctl::cli {

// "512 B", "12.3 KiB", "4.0 MiB", ...
std::string HumanBytes(uint64_t bytes);

// Lowercase words for the table: "ok", "busy", "timed out", ...
std::string StatusWord(v1::CaptureStatus status);
std::string PhaseWord(v1::ProcessPhase phase);
std::string CaptureStateWord(v1::CaptureState state);

// "-" for the -1 the API uses for an unknown rank or size.
std::string RankText(int32_t rank);

// The command line joined with spaces, the program shown by its file name
// ("/opt/conda/envs/x/bin/python3 train.py" is "python3 train.py", so the
// script tells ranks apart), cut to at most `max_chars` with a trailing
// "..." when longer (0: never cut); control characters are replaced by '?'
// so a hostile argv cannot drive the terminal.
std::string CommandText(const google::protobuf::RepeatedPtrField<std::string>& argv,
                        size_t max_chars);

// Replaces control characters (escape sequences) in text that came from the
// daemon or a training process before it reaches a terminal.
std::string Printable(absl::string_view text);

// "2024-05-01 12:34:56" in `zone`; "-" for an unset timestamp.
std::string TimestampText(const google::protobuf::Timestamp& ts, absl::TimeZone zone);

// One JSON document on one line, every field printed (zeros included), the
// keys of every object sorted: the same message prints the same bytes.
std::string ToJson(const google::protobuf::Message& message);

// The message's JSON mapping (as ToJson prints it) as a Struct value, to
// embed in a larger document.
void SetJsonValue(google::protobuf::Value* value, const google::protobuf::Message& message);

// Cuts `text` to at most `max_chars`, ending in "..." when cut.
std::string Shorten(std::string text, size_t max_chars);

// "worker", "launcher", "helper"; "-" when unknown.
std::string RoleWord(v1::ProcessRole role);

// A plain-text table: a header row and left-aligned columns separated by two
// spaces; columns marked numeric are right-aligned. A row may be followed by
// a free-form note line printed indented under it.
class Table {
 public:
  explicit Table(std::vector<std::string> headers, std::vector<bool> numeric = {});
  void AddRow(std::vector<std::string> cells, std::string note = "");
  void Render(std::ostream& out) const;
  size_t rows() const { return rows_.size(); }

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string note;
  };
  std::vector<std::string> headers_;
  std::vector<bool> numeric_;
  std::vector<Row> rows_;
};

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_FORMAT_H_
