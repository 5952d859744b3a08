#include "cli/trace_progress.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "cli/duration.h"
#include "cli/format.h"
#include "cli/proto_time.h"
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

// "4:18", "1:02:03": a clock's reading of a non-negative duration, to the
// second below.
std::string ClockText(absl::Duration d) {
  const int64_t total = std::max<int64_t>(absl::ToInt64Seconds(d), 0);
  const int64_t h = total / 3600, m = total / 60 % 60, sec = total % 60;
  const std::string ss = absl::StrCat(sec < 10 ? "0" : "", sec);
  if (h > 0) return absl::StrCat(h, ":", m < 10 ? "0" : "", m, ":", ss);
  return absl::StrCat(m, ":", ss);
}

// "5000 events, 1.2 MiB received"; "3.1 MiB of 12 MiB received" while a
// payload arrives; empty before anything arrived.
std::string ReceivedText(uint64_t events, uint64_t bytes, uint64_t total) {
  if (total > bytes) {
    return absl::StrCat(HumanBytes(bytes), " of ", HumanBytes(total), " received");
  }
  if (bytes == 0) return "";
  return absl::StrCat(events, " events, ", HumanBytes(bytes), " received");
}

// What the displays know of each host.
struct ProcessLine {
  std::string text;
  bool done = false;
  bool ok = false;
  v1::ProcessPhase phase = v1::PROCESS_PHASE_REQUESTED;
  uint64_t events = 0;
  uint64_t bytes = 0;
  uint64_t bytes_total = 0;
};

// Processes per phase and the data received, of one host or of all.
struct Tally {
  size_t requested = 0, capturing = 0, processing = 0, done = 0, ok = 0;
  uint64_t events = 0, bytes = 0, bytes_total = 0;

  void Add(const ProcessLine& line) {
    if (line.done) {
      ++done;
      ok += line.ok ? 1 : 0;
    } else if (line.phase == v1::PROCESS_PHASE_CAPTURING) {
      ++capturing;
    } else if (line.phase == v1::PROCESS_PHASE_PROCESSING) {
      ++processing;
    } else {
      ++requested;
    }
    events += line.events;
    bytes += line.bytes;
    bytes_total += std::max(line.bytes_total, line.bytes);
  }
  void Add(const Tally& other) {
    requested += other.requested;
    capturing += other.capturing;
    processing += other.processing;
    done += other.done;
    ok += other.ok;
    events += other.events;
    bytes += other.bytes;
    bytes_total += other.bytes_total;
  }
  // "1 requested, 2 capturing, 1 done (1 ok)": the phases with processes.
  std::string PhasesText() const {
    std::vector<std::string> parts;
    if (requested > 0) parts.push_back(absl::StrCat(requested, " requested"));
    if (capturing > 0) parts.push_back(absl::StrCat(capturing, " capturing"));
    if (processing > 0) parts.push_back(absl::StrCat(processing, " processing"));
    if (done > 0) parts.push_back(absl::StrCat(done, " done (", ok, " ok)"));
    return absl::StrJoin(parts, ", ");
  }
  std::string Text() const {
    std::string text = PhasesText();
    if (std::string received = ReceivedText(events, bytes, bytes_total); !received.empty()) {
      absl::StrAppend(&text, text.empty() ? "" : "; ", received);
    }
    return text;
  }
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
  Tally tally() const {
    Tally t;
    for (const auto& [pid, line] : processes) t.Add(line);
    return t;
  }
};

// The model both displays update.
class Fleet {
 public:
  explicit Fleet(std::vector<std::string> targets) {
    for (std::string& t : targets) {
      HostView host;
      host.target = std::move(t);
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
    if (!started_) started_ = s;
  }
  void Progress(size_t h, const v1::ProcessProgress& p) {
    ProcessLine& line = hosts_[h].processes[p.pid()];
    if (line.done) return;
    line.text = PhaseText(p);
    line.phase = p.phase();
    line.events = p.events_received();
    line.bytes = p.bytes_received();
    line.bytes_total = p.bytes_total();
  }
  void Result(size_t h, const v1::ProcessResult& r) {
    ProcessLine& line = hosts_[h].processes[r.pid()];
    line.text = ResultText(r);
    line.done = true;
    line.ok = r.status() == v1::CAPTURE_STATUS_OK;
    // The data the daemon received: what it converted, or what it refused.
    if (line.ok) {
      line.events = r.event_count();
      line.bytes = std::max(line.bytes, r.payload_bytes());
    } else if (r.payload_bytes() > 0) {
      line.bytes = r.payload_bytes();
    }
    line.bytes_total = line.bytes;
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

  // "window 0:42 of 5:00, 4:18 left" and the like, at `now`; empty before
  // any host started the trace.
  std::string ClockLine(absl::Time now) const {
    if (!started_) return "";
    const absl::Time start = FromProtoTime(started_->start_time());
    const absl::Time end = FromProtoTime(started_->end_time());
    if (started_->iterations() > 0) {
      std::string text =
          absl::StrCat(WindowText(*started_), ", ", ClockText(now - start), " so far");
      if (end > now) absl::StrAppend(&text, " (bound in ", ClockText(end - now), ")");
      return text;
    }
    if (now < start) {
      return absl::StrCat("window opens in ", ClockText(absl::Ceil(start - now, absl::Seconds(1))));
    }
    // Whole seconds, so that elapsed and left add up to the window.
    const absl::Duration window = absl::Seconds(absl::ToInt64Seconds(end - start));
    const absl::Duration elapsed = absl::Seconds(absl::ToInt64Seconds(now - start));
    if (elapsed >= window) {
      return absl::StrCat("window of ", ClockText(window), " closed ", ClockText(now - end),
                          " ago");
    }
    return absl::StrCat("window ", ClockText(elapsed), " of ", ClockText(window), ", ",
                        ClockText(window - elapsed), " left");
  }

 private:
  std::vector<HostView> hosts_;
  std::string trace_id_;
  std::string window_;
  std::optional<v1::TraceStarted> started_;
};

// The lines a live display last drew, redrawn in place: back to the first
// one, then each line cleared and rewritten, cut to the width so that none
// wraps (a wrapped line would break the arithmetic); old lines past the new
// ones are cleared and the cursor goes back above them. Lines are cleared
// one by one, never the screen from its top: a terminal (tmux among them)
// may keep a whole screen it is told to clear in its history.
class LiveArea {
 public:
  LiveArea(std::ostream& err, size_t columns) : err_(err), columns_(columns) {}

  void Draw(const std::vector<std::string>& lines) {
    if (drawn_ > 0) err_ << "\x1b[" << drawn_ << "F";
    for (const std::string& text : lines) {
      err_ << "\x1b[2K" << absl::string_view(text).substr(0, columns_ - 1) << "\n";
    }
    if (drawn_ > lines.size()) {
      const size_t extra = drawn_ - lines.size();
      for (size_t i = 0; i < extra; ++i) err_ << "\x1b[2K\n";
      err_ << "\x1b[" << extra << "F";
    }
    drawn_ = lines.size();
    err_.flush();
  }

 private:
  std::ostream& err_;
  const size_t columns_;
  size_t drawn_ = 0;
};

// Calls `redraw` every `interval` from a thread of its own until stopped;
// `redraw` takes its own lock.
class Ticker {
 public:
  Ticker(absl::Duration interval, std::function<void()> redraw) {
    if (interval <= absl::ZeroDuration()) return;
    thread_ = std::thread([this, interval, redraw = std::move(redraw)] {
      while (true) {
        {
          absl::MutexLock lock(&mu_);
          if (mu_.AwaitWithTimeout(absl::Condition(&stop_), interval)) return;
        }
        redraw();
      }
    });
  }
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;
  ~Ticker() { Stop(); }

  // Waits for a redraw in progress; none follows.
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class PlainProgress final : public TraceProgress {
 public:
  PlainProgress(std::ostream& err, std::vector<std::string> targets)
      : err_(err), fleet_(std::move(targets)), single_(fleet_.hosts().size() == 1) {}

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
  TerminalProgress(std::ostream& err, size_t columns, std::vector<std::string> targets,
                   LiveDisplayOptions options)
      : area_(err, columns),
        now_(std::move(options.now)),
        fleet_(std::move(targets)),
        single_(fleet_.hosts().size() == 1),
        ticker_(options.redraw_interval, [this] { Tick(); }) {}
  ~TerminalProgress() override { ticker_.Stop(); }

  void Connecting(size_t h) override {
    absl::MutexLock lock(&mu_);
    fleet_.Connecting(h);
    if (!single_) Redraw();
  }
  void Started(size_t h, const v1::TraceStarted& started) override {
    absl::MutexLock lock(&mu_);
    fleet_.Started(h, started);
    if (single_) header_ = StartedText(started);
    Redraw();
  }
  void Progress(size_t h, const v1::ProcessProgress& p) override {
    absl::MutexLock lock(&mu_);
    fleet_.Progress(h, p);
    Redraw();
  }
  void Result(size_t h, const v1::ProcessResult& r) override {
    absl::MutexLock lock(&mu_);
    fleet_.Result(h, r);
    Redraw();
  }
  void HostDone(size_t h, HostStatus status, absl::string_view error) override {
    absl::MutexLock lock(&mu_);
    fleet_.HostDone(h, status, error);
    if (!single_) Redraw();
  }
  void Finish() override {
    ticker_.Stop();
    absl::MutexLock lock(&mu_);
    finished_ = true;
    area_.Draw({});
  }
  void Tick() override {
    absl::MutexLock lock(&mu_);
    if (drew_ && !finished_) Redraw();
  }

 private:
  // The window's clock, then the processes per phase and what arrived.
  std::string StatusLine(const Tally& tally) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> parts;
    if (std::string clock = fleet_.ClockLine(now_()); !clock.empty()) parts.push_back(clock);
    if (std::string text = tally.Text(); !text.empty()) parts.push_back(text);
    return parts.empty() ? "" : absl::StrCat("  ", absl::StrJoin(parts, "; "));
  }

  static std::string ProcessText(const ProcessLine& line) {
    std::string text = line.text;
    if (line.done) return text;
    if (std::string received = ReceivedText(line.events, line.bytes, line.bytes_total);
        !received.empty()) {
      absl::StrAppend(&text, ", ", received);
    }
    return text;
  }

  std::vector<std::string> SingleHostLines() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> out;
    if (header_.empty()) return out;
    out.push_back(header_);
    const HostView& host = fleet_.hosts()[0];
    if (std::string status = StatusLine(host.tally()); !status.empty()) out.push_back(status);
    const auto& processes = host.processes;
    if (processes.size() <= kMaxLiveLines) {
      for (const auto& [pid, line] : processes) {
        out.push_back(absl::StrCat("  pid ", pid, ": ", ProcessText(line)));
      }
    } else {
      out.push_back(absl::StrCat("  ", host.done(), " of ", processes.size(), " processes done"));
    }
    return out;
  }

  static std::string HostLine(const HostView& host) {
    switch (host.state) {
      case HostView::State::kWaiting:
        return "waiting";
      case HostView::State::kConnecting:
        return "connecting";
      case HostView::State::kRunning: {
        std::string text = absl::StrCat(host.processes.size(), " selected");
        if (std::string tally = host.tally().Text(); !tally.empty()) {
          absl::StrAppend(&text, ": ", tally);
        }
        return text;
      }
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

  std::vector<std::string> FleetLines() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::vector<HostView>& hosts = fleet_.hosts();
    std::string header = "trace";
    if (!fleet_.trace_id().empty()) absl::StrAppend(&header, " ", fleet_.trace_id());
    absl::StrAppend(&header, ": ", hosts.size(), " hosts");
    if (!fleet_.window().empty()) absl::StrAppend(&header, ", ", fleet_.window());
    std::vector<std::string> out = {header};
    Tally all;
    for (const HostView& h : hosts) all.Add(h.tally());
    if (std::string status = StatusLine(all); !status.empty()) out.push_back(status);
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
    }
    out.push_back(
        absl::StrCat("  hosts: ", absl::StrJoin(states, ", ", [](std::string* s, const auto& e) {
                       absl::StrAppend(s, e.second, " ", e.first);
                     })));
    return out;
  }

  void Redraw() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> lines = single_ ? SingleHostLines() : FleetLines();
    drew_ = drew_ || !lines.empty();
    area_.Draw(lines);
  }

  absl::Mutex mu_;
  LiveArea area_ ABSL_GUARDED_BY(mu_);
  const std::function<absl::Time()> now_;
  Fleet fleet_ ABSL_GUARDED_BY(mu_);
  const bool single_;
  std::string header_ ABSL_GUARDED_BY(mu_);
  bool drew_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // Last: its thread uses the members above.
  Ticker ticker_;
};

// One host's download as shown.
struct DownloadLine {
  enum class State { kWaiting, kRunning, kDone } state = State::kWaiting;
  size_t files = 0, files_done = 0;
  uint64_t bytes = 0, bytes_done = 0;
  std::string error;
};

class TerminalDownloadProgress final : public DownloadProgress {
 public:
  TerminalDownloadProgress(std::ostream& err, size_t columns, std::vector<std::string> labels,
                           LiveDisplayOptions options)
      : area_(err, columns),
        now_(std::move(options.now)),
        interval_(options.redraw_interval),
        labels_(std::move(labels)),
        lines_(labels_.size()) {}

  void Begin(size_t host, size_t files, uint64_t bytes) override {
    absl::MutexLock lock(&mu_);
    DownloadLine& line = lines_[host];
    line.state = DownloadLine::State::kRunning;
    line.files = files;
    line.bytes = bytes;
    Redraw(true);
  }
  void Update(size_t host, size_t files_done, uint64_t bytes_done) override {
    absl::MutexLock lock(&mu_);
    DownloadLine& line = lines_[host];
    const bool file_done = files_done != line.files_done;
    line.files_done = files_done;
    line.bytes_done = bytes_done;
    Redraw(file_done);
  }
  void Done(size_t host, const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    DownloadLine& line = lines_[host];
    line.state = DownloadLine::State::kDone;
    if (!status.ok()) line.error = Printable(status.message());
    Redraw(true);
  }
  void Finish() override {
    absl::MutexLock lock(&mu_);
    area_.Draw({});
  }

 private:
  static std::string LineText(const DownloadLine& line) {
    std::string text;
    switch (line.state) {
      case DownloadLine::State::kWaiting:
        return "waiting";
      case DownloadLine::State::kRunning:
        text = "downloading";
        break;
      case DownloadLine::State::kDone:
        if (!line.error.empty()) return absl::StrCat("failed: ", line.error);
        text = "downloaded";
        break;
    }
    absl::StrAppend(&text, ", ", line.files_done, " of ", std::max(line.files, line.files_done),
                    " files, ", HumanBytes(line.bytes_done), " of ",
                    HumanBytes(std::max(line.bytes, line.bytes_done)));
    return text;
  }

  void Redraw(bool now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time t = now_();
    if (!now && t < last_draw_ + interval_) return;
    last_draw_ = t;
    // Hosts with nothing to fetch are not shown.
    std::vector<size_t> shown;
    for (size_t i = 0; i < lines_.size(); ++i) {
      if (lines_[i].state != DownloadLine::State::kWaiting) shown.push_back(i);
    }
    std::vector<std::string> out;
    if (lines_.size() == 1 && !shown.empty()) {
      out.push_back(absl::StrCat("  ", LineText(lines_[0])));
    } else if (shown.size() <= kMaxLiveLines) {
      size_t width = 0;
      for (size_t i : shown) width = std::max(width, labels_[i].size());
      for (size_t i : shown) {
        std::string label = labels_[i];  // a copy, padded
        label.resize(width, ' ');
        out.push_back(absl::StrCat("  ", label, "  ", LineText(lines_[i])));
      }
    } else {
      DownloadLine all;
      size_t running = 0;
      size_t done = 0;
      for (size_t i : shown) {
        const DownloadLine& line = lines_[i];
        all.files += line.files;
        all.files_done += line.files_done;
        all.bytes += line.bytes;
        all.bytes_done += line.bytes_done;
        running += line.state == DownloadLine::State::kRunning ? 1 : 0;
        done += line.state == DownloadLine::State::kDone ? 1 : 0;
      }
      all.state = DownloadLine::State::kRunning;
      out.push_back(absl::StrCat("  ", shown.size(), " hosts: ", running, " downloading, ", done,
                                 " done; ", LineText(all)));
    }
    area_.Draw(out);
  }

  absl::Mutex mu_;
  LiveArea area_ ABSL_GUARDED_BY(mu_);
  const std::function<absl::Time()> now_;
  const absl::Duration interval_;
  const std::vector<std::string> labels_;
  std::vector<DownloadLine> lines_ ABSL_GUARDED_BY(mu_);
  absl::Time last_draw_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace

std::unique_ptr<TraceProgress> MakePlainProgress(std::ostream& err,
                                                 std::vector<std::string> targets) {
  return std::make_unique<PlainProgress>(err, std::move(targets));
}

std::unique_ptr<TraceProgress> MakeTerminalProgress(std::ostream& err, size_t columns,
                                                    std::vector<std::string> targets,
                                                    LiveDisplayOptions options) {
  return std::make_unique<TerminalProgress>(err, std::max<size_t>(columns, 20), std::move(targets),
                                            std::move(options));
}

std::unique_ptr<DownloadProgress> MakeTerminalDownloadProgress(std::ostream& err, size_t columns,
                                                               std::vector<std::string> labels,
                                                               LiveDisplayOptions options) {
  return std::make_unique<TerminalDownloadProgress>(err, std::max<size_t>(columns, 20),
                                                    std::move(labels), std::move(options));
}

}  // namespace gpuctl::cli
