#include "cli/trace_progress.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/duration.h"
#include "cli/format.h"
#include "google/protobuf/util/time_util.h"

namespace gpuctl::cli {
namespace {

// More processes than this are summarized in one line on a terminal.
constexpr size_t kMaxLiveLines = 16;

std::string ResultText(const v1::ProcessResult& result) {
  if (result.status() == v1::CAPTURE_STATUS_OK) {
    return absl::StrCat("ok, ", result.event_count(), " events, ",
                        HumanBytes(result.stored_bytes()));
  }
  std::string text = StatusWord(result.status());
  if (!result.message().empty()) absl::StrAppend(&text, ": ", Printable(result.message()));
  return text;
}

std::string StartedText(const v1::TraceStarted& started) {
  absl::Duration window =
      absl::Milliseconds(google::protobuf::util::TimeUtil::DurationToMilliseconds(
          started.end_time() - started.start_time()));
  std::string text =
      absl::StrCat("trace ", Printable(started.trace_id()), ": ", started.processes_size(),
                   started.processes_size() == 1 ? " process" : " processes", " selected on ",
                   Printable(started.host()));
  if (window > absl::ZeroDuration())
    absl::StrAppend(&text, ", window ", FormatUserDuration(window));
  return text;
}

class PlainProgress final : public TraceProgress {
 public:
  explicit PlainProgress(std::ostream& err) : err_(err) {}
  void Started(const v1::TraceStarted& started) override { err_ << StartedText(started) << "\n"; }
  void Progress(const v1::ProcessProgress& p) override {
    err_ << "pid " << p.pid() << ": " << PhaseWord(p.phase());
    if (!p.message().empty()) err_ << " (" << Printable(p.message()) << ")";
    err_ << "\n";
  }
  void Result(const v1::ProcessResult& r) override {
    err_ << "pid " << r.pid() << ": " << ResultText(r) << "\n";
  }
  void Finish() override { err_.flush(); }

 private:
  std::ostream& err_;
};

class TerminalProgress final : public TraceProgress {
 public:
  TerminalProgress(std::ostream& err, size_t columns) : err_(err), columns_(columns) {}

  void Started(const v1::TraceStarted& started) override {
    header_ = StartedText(started);
    for (const v1::ProcessInfo& p : started.processes()) {
      lines_[p.pid()] = Line{"requested", false};
    }
    Redraw();
  }
  void Progress(const v1::ProcessProgress& p) override {
    Line& line = lines_[p.pid()];
    if (line.done) return;
    line.text = PhaseWord(p.phase());
    if (!p.message().empty()) absl::StrAppend(&line.text, " (", Printable(p.message()), ")");
    Redraw();
  }
  void Result(const v1::ProcessResult& r) override {
    lines_[r.pid()] = Line{ResultText(r), true};
    Redraw();
  }
  void Finish() override {
    Erase();
    err_.flush();
  }

 private:
  struct Line {
    std::string text;
    bool done = false;
  };

  void Erase() {
    // Back to the first line drawn, then clear to the end of the screen.
    if (drawn_ > 0) err_ << "\x1b[" << drawn_ << "F\x1b[J";
    drawn_ = 0;
  }

  void Redraw() {
    Erase();
    std::vector<std::string> out;
    if (!header_.empty()) out.push_back(header_);
    if (lines_.size() <= kMaxLiveLines) {
      for (const auto& [pid, line] : lines_)
        out.push_back(absl::StrCat("  pid ", pid, ": ", line.text));
    } else {
      size_t done = 0;
      for (const auto& [pid, line] : lines_) done += line.done ? 1 : 0;
      out.push_back(absl::StrCat("  ", done, " of ", lines_.size(), " processes done"));
    }
    // A wrapped line would break the cursor arithmetic of Erase.
    for (const std::string& text : out) {
      err_ << "\x1b[2K" << absl::string_view(text).substr(0, columns_ - 1) << "\n";
    }
    drawn_ = out.size();
    err_.flush();
  }

  std::ostream& err_;
  const size_t columns_;
  std::string header_;
  std::map<int32_t, Line> lines_;
  size_t drawn_ = 0;
};

}  // namespace

std::unique_ptr<TraceProgress> MakePlainProgress(std::ostream& err) {
  return std::make_unique<PlainProgress>(err);
}

std::unique_ptr<TraceProgress> MakeTerminalProgress(std::ostream& err, size_t columns) {
  return std::make_unique<TerminalProgress>(err, std::max<size_t>(columns, 20));
}

}  // namespace gpuctl::cli
