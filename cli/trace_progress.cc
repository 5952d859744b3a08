#include "cli/trace_progress.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/duration.h"
#include "cli/format.h"
#include "google/protobuf/util/time_util.h"

namespace gpuctl::cli {
namespace {

// More lines than this (processes of one host, or hosts) are summarized on
// a terminal.
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

std::string WindowText(const v1::TraceStarted& started) {
  if (started.iterations() > 0) {
    return absl::StrCat("steps ", started.start_step(), "-",
                        started.start_step() + started.iterations() - 1);
  }
  absl::Duration window =
      absl::Milliseconds(google::protobuf::util::TimeUtil::DurationToMilliseconds(
          started.end_time() - started.start_time()));
  return window > absl::ZeroDuration() ? absl::StrCat("window ", FormatUserDuration(window)) : "";
}

std::string StartedText(const v1::TraceStarted& started) {
  std::string text =
      absl::StrCat("trace ", Printable(started.trace_id()), ": ", started.processes_size(),
                   started.processes_size() == 1 ? " process" : " processes", " selected on ",
                   Printable(started.host()));
  if (std::string window = WindowText(started); !window.empty()) {
    absl::StrAppend(&text, ", ", window);
  }
  return text;
}

std::string PhaseText(const v1::ProcessProgress& p) {
  std::string text = PhaseWord(p.phase());
  if (!p.message().empty()) absl::StrAppend(&text, " (", Printable(p.message()), ")");
  return text;
}

// What the displays know of each host.
struct ProcessLine {
  std::string text;
  bool done = false;
  bool ok = false;
};

struct HostView {
  std::string target;
  enum class State { kWaiting, kConnecting, kRunning, kDone } state = State::kWaiting;
  HostStatus status = HostStatus::kOk;
  std::string error;
  std::map<int32_t, ProcessLine> processes;

  // The host as contacted: daemons on one machine share a host name.
  const std::string& label() const { return target; }
  size_t done() const {
    return std::count_if(processes.begin(), processes.end(),
                         [](const auto& e) { return e.second.done; });
  }
  size_t ok() const {
    return std::count_if(processes.begin(), processes.end(),
                         [](const auto& e) { return e.second.ok; });
  }
};

// The model both displays update.
class Fleet {
 public:
  explicit Fleet(const std::vector<std::string>& targets) {
    for (const std::string& t : targets) {
      HostView host;
      host.target = t;
      hosts_.push_back(std::move(host));
    }
  }
  void Connecting(size_t h) { hosts_[h].state = HostView::State::kConnecting; }
  void Started(size_t h, const v1::TraceStarted& s) {
    HostView& host = hosts_[h];
    host.state = HostView::State::kRunning;
    for (const v1::ProcessInfo& p : s.processes()) host.processes[p.pid()].text = "requested";
    if (trace_id_.empty()) trace_id_ = Printable(s.trace_id());
    if (window_.empty()) window_ = WindowText(s);
  }
  void Progress(size_t h, const v1::ProcessProgress& p) {
    ProcessLine& line = hosts_[h].processes[p.pid()];
    if (!line.done) line.text = PhaseText(p);
  }
  void Result(size_t h, const v1::ProcessResult& r) {
    hosts_[h].processes[r.pid()] =
        ProcessLine{ResultText(r), true, r.status() == v1::CAPTURE_STATUS_OK};
  }
  void HostDone(size_t h, HostStatus status, absl::string_view error) {
    HostView& host = hosts_[h];
    host.state = HostView::State::kDone;
    host.status = status;
    host.error = Printable(error);
  }

  const std::vector<HostView>& hosts() const { return hosts_; }
  const std::string& trace_id() const { return trace_id_; }
  const std::string& window() const { return window_; }

 private:
  std::vector<HostView> hosts_;
  std::string trace_id_;
  std::string window_;
};

class PlainProgress final : public TraceProgress {
 public:
  PlainProgress(std::ostream& err, std::vector<std::string> targets)
      : err_(err), fleet_(targets), single_(targets.size() == 1) {}

  void Connecting(size_t h) override { fleet_.Connecting(h); }
  void Started(size_t h, const v1::TraceStarted& started) override {
    fleet_.Started(h, started);
    err_ << Prefix(h) << StartedText(started) << "\n";
  }
  void Progress(size_t h, const v1::ProcessProgress& p) override {
    fleet_.Progress(h, p);
    // A daemon repeats a long ingest's progress as a sign of life: a line
    // is written when the text changes only.
    std::string text = PhaseText(p);
    std::string& last = last_text_[{h, p.pid()}];
    if (text == last) return;
    err_ << Prefix(h) << "pid " << p.pid() << ": " << text << "\n";
    last = std::move(text);
  }
  void Result(size_t h, const v1::ProcessResult& r) override {
    fleet_.Result(h, r);
    err_ << Prefix(h) << "pid " << r.pid() << ": " << ResultText(r) << "\n";
  }
  void HostDone(size_t h, HostStatus status, absl::string_view error) override {
    fleet_.HostDone(h, status, error);
    // One host's failure is reported once, by the command.
    if (single_) return;
    err_ << Prefix(h) << HostStatusWord(status);
    if (!error.empty()) err_ << ": " << Printable(error);
    err_ << "\n";
  }
  void Finish() override { err_.flush(); }

 private:
  std::string Prefix(size_t h) const {
    if (single_) return "";
    return absl::StrCat(fleet_.hosts()[h].label(), ": ");
  }

  std::ostream& err_;
  Fleet fleet_;
  const bool single_;
  std::map<std::pair<size_t, int32_t>, std::string> last_text_;
};

class TerminalProgress final : public TraceProgress {
 public:
  TerminalProgress(std::ostream& err, size_t columns, std::vector<std::string> targets)
      : err_(err), columns_(columns), fleet_(targets), single_(targets.size() == 1) {}

  void Connecting(size_t h) override {
    fleet_.Connecting(h);
    if (!single_) Redraw();
  }
  void Started(size_t h, const v1::TraceStarted& started) override {
    fleet_.Started(h, started);
    if (single_) header_ = StartedText(started);
    Redraw();
  }
  void Progress(size_t h, const v1::ProcessProgress& p) override {
    fleet_.Progress(h, p);
    Redraw();
  }
  void Result(size_t h, const v1::ProcessResult& r) override {
    fleet_.Result(h, r);
    Redraw();
  }
  void HostDone(size_t h, HostStatus status, absl::string_view error) override {
    fleet_.HostDone(h, status, error);
    if (!single_) Redraw();
  }
  void Finish() override {
    Erase();
    err_.flush();
  }

 private:
  void Erase() {
    // Back to the first line drawn, then clear to the end of the screen.
    if (drawn_ > 0) err_ << "\x1b[" << drawn_ << "F\x1b[J";
    drawn_ = 0;
  }

  std::vector<std::string> SingleHostLines() const {
    std::vector<std::string> out;
    if (!header_.empty()) out.push_back(header_);
    const auto& processes = fleet_.hosts()[0].processes;
    if (processes.size() <= kMaxLiveLines) {
      for (const auto& [pid, line] : processes) {
        out.push_back(absl::StrCat("  pid ", pid, ": ", line.text));
      }
    } else {
      out.push_back(absl::StrCat("  ", fleet_.hosts()[0].done(), " of ", processes.size(),
                                 " processes done"));
    }
    return out;
  }

  static std::string HostLine(const HostView& host) {
    switch (host.state) {
      case HostView::State::kWaiting:
        return "waiting";
      case HostView::State::kConnecting:
        return "connecting";
      case HostView::State::kRunning:
        return absl::StrCat(host.processes.size(), " selected, ", host.done(), " done, ", host.ok(),
                            " ok");
      case HostView::State::kDone:
        break;
    }
    std::string text = HostStatusWord(host.status);
    if (!host.processes.empty()) {
      absl::StrAppend(&text, ", ", host.ok(), " of ", host.processes.size(), " processes ok");
    }
    if (host.status != HostStatus::kOk && !host.error.empty()) {
      absl::StrAppend(&text, ": ", host.error);
    }
    return text;
  }

  std::vector<std::string> FleetLines() const {
    const std::vector<HostView>& hosts = fleet_.hosts();
    std::string header = "trace";
    if (!fleet_.trace_id().empty()) absl::StrAppend(&header, " ", fleet_.trace_id());
    absl::StrAppend(&header, ": ", hosts.size(), " hosts");
    if (!fleet_.window().empty()) absl::StrAppend(&header, ", ", fleet_.window());
    std::vector<std::string> out = {header};
    if (hosts.size() <= kMaxLiveLines) {
      size_t width = 0;
      for (const HostView& h : hosts) width = std::max(width, h.label().size());
      for (const HostView& h : hosts) {
        std::string label = h.label();  // a copy, padded
        label.resize(width, ' ');
        out.push_back(absl::StrCat("  ", label, "  ", HostLine(h)));
      }
      return out;
    }
    std::map<std::string, size_t> states;
    size_t selected = 0, done = 0, ok = 0;
    for (const HostView& h : hosts) {
      switch (h.state) {
        case HostView::State::kWaiting:
          ++states["waiting"];
          break;
        case HostView::State::kConnecting:
          ++states["connecting"];
          break;
        case HostView::State::kRunning:
          ++states["running"];
          break;
        case HostView::State::kDone:
          ++states[HostStatusWord(h.status)];
          break;
      }
      selected += h.processes.size();
      done += h.done();
      ok += h.ok();
    }
    out.push_back(
        absl::StrCat("  hosts: ", absl::StrJoin(states, ", ", [](std::string* s, const auto& e) {
                       absl::StrAppend(s, e.second, " ", e.first);
                     })));
    out.push_back(
        absl::StrCat("  processes: ", selected, " selected, ", done, " done, ", ok, " ok"));
    return out;
  }

  void Redraw() {
    Erase();
    std::vector<std::string> out = single_ ? SingleHostLines() : FleetLines();
    // A wrapped line would break the cursor arithmetic of Erase.
    for (const std::string& text : out) {
      err_ << "\x1b[2K" << absl::string_view(text).substr(0, columns_ - 1) << "\n";
    }
    drawn_ = out.size();
    err_.flush();
  }

  std::ostream& err_;
  const size_t columns_;
  Fleet fleet_;
  const bool single_;
  std::string header_;
  size_t drawn_ = 0;
};

}  // namespace

std::unique_ptr<TraceProgress> MakePlainProgress(std::ostream& err,
                                                 std::vector<std::string> targets) {
  return std::make_unique<PlainProgress>(err, std::move(targets));
}

std::unique_ptr<TraceProgress> MakeTerminalProgress(std::ostream& err, size_t columns,
                                                    std::vector<std::string> targets) {
  return std::make_unique<TerminalProgress>(err, std::max<size_t>(columns, 20), std::move(targets));
}

}  // namespace gpuctl::cli
