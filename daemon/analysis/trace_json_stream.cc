#include "daemon/analysis/trace_json_stream.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace gpuctl::analysis {
namespace {

namespace od = simdjson::ondemand;

// The most the stream holds at once: one traceEvents element, or the
// top-level members before or after traceEvents.
constexpr size_t kMaxHeldBytes = size_t{64} << 20;
constexpr size_t kNone = ~size_t{0};

class Stream {
 public:
  Stream(TraceInput* input, TraceJsonVisitor* visitor, size_t piece_bytes)
      : input_(input), visitor_(visitor), piece_bytes_(std::max<size_t>(piece_bytes, 1)) {}
  absl::Status Run();

 private:
  // The held bytes: data()[0, held()), at document offset base_. The byte
  // before data() is free for a piece's opening bracket, and the buffer has
  // room for its closing bracket and simdjson's padding after the held bytes.
  char* data() const { return buf_.get() + 1 + begin_; }
  size_t held() const { return end_ - begin_; }
  void Drop(size_t n) {
    begin_ += n;
    base_ += n;
  }
  // Appends up to `want` bytes of the input; false when none came.
  bool ReadMore(size_t want);
  // Drops whitespace, reading on while only whitespace is held; false at the
  // end of the input.
  bool SkipSpace();
  // Where the held bytes may be cut between tokens: after the last line
  // break, else after the last comma outside strings; 0 if nowhere.
  size_t FindCut() const;
  // simdjson over opener + data()[0, cut) + closer; Unseal() puts back the
  // bytes the closer covered, once the document is no longer read.
  simdjson::error_code Seal(char opener, char closer, size_t cut, od::document* doc);
  void Unseal(size_t cut) {
    data()[cut] = sealed_bytes_[0];
    data()[cut + 1] = sealed_bytes_[1];
  }
  // Where `doc` stopped, as an index into data(); `cut` (the closer) when it
  // ran past the held bytes.
  size_t Where(od::document& doc, size_t cut) const;

  absl::Status Malformed(size_t index, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON at byte ", base_ + index, ": ", AsAbsl(what)));
  }
  absl::Status NotATrace(std::string_view what, size_t index) const {
    return absl::InvalidArgumentError(
        absl::StrCat("not a trace: ", AsAbsl(what), " at byte ", base_ + index));
  }
  absl::Status TooLarge(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("not a trace: ", AsAbsl(what), " at byte ",
                                                   base_, " is larger than ", kMaxHeldBytes >> 20,
                                                   " MiB"));
  }

  // The top-level members: before traceEvents (data() just past the `{`;
  // stops at traceEvents, data() just past its `[`) or after it (data() just
  // past the `,` that follows it; the input read to its end).
  absl::Status Members(bool after_events);
  absl::Status Events();
  absl::Status AfterEvents();

  TraceInput* input_;
  TraceJsonVisitor* visitor_;
  size_t piece_bytes_;
  od::parser parser_;
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;  // data bytes the buffer holds
  size_t begin_ = 0, end_ = 0;
  uint64_t base_ = 0;
  bool eof_ = false;
  char sealed_bytes_[2] = {0, 0};
};

bool Stream::ReadMore(size_t want) {
  if (eof_) return false;
  if (end_ + want > cap_) {
    const size_t held_bytes = held();
    if (held_bytes + want <= cap_) {
      std::memmove(buf_.get() + 1, data(), held_bytes);
    } else {
      const size_t cap = std::max(cap_ * 2, held_bytes + want);
      std::unique_ptr<char[]> grown(new char[cap + 2 + simdjson::SIMDJSON_PADDING]);
      if (held_bytes > 0) std::memcpy(grown.get() + 1, data(), held_bytes);
      std::memset(grown.get() + 1 + cap, ' ', 1 + simdjson::SIMDJSON_PADDING);
      buf_ = std::move(grown);
      cap_ = cap;
    }
    begin_ = 0;
    end_ = held_bytes;
  }
  size_t added = 0;
  while (added < want) {
    size_t n = input_->Read(buf_.get() + 1 + end_ + added, want - added);
    if (n == 0) {
      eof_ = true;
      break;
    }
    added += n;
  }
  end_ += added;
  return added > 0;
}

bool Stream::SkipSpace() {
  while (true) {
    size_t i = 0;
    const char* d = data();
    const size_t n = held();
    while (i < n && IsJsonSpace(d[i])) ++i;
    Drop(i);
    if (held() > 0) return true;
    if (!ReadMore(piece_bytes_)) return false;
  }
}

size_t Stream::FindCut() const {
  const char* d = data();
  const size_t n = held();
  if (const void* nl = memrchr(d, '\n', n); nl != nullptr) {
    return static_cast<size_t>(static_cast<const char*>(nl) - d) + 1;
  }
  // No line break: the held bytes start between tokens, so strings are
  // tracked from there.
  size_t cut = 0;
  bool in_string = false;
  for (size_t i = 0; i < n; ++i) {
    const char c = d[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == ',') {
      cut = i + 1;
    }
  }
  return cut;
}

simdjson::error_code Stream::Seal(char opener, char closer, size_t cut, od::document* doc) {
  char* d = data();
  d[-1] = opener;
  // The closer, and a space after it: simdjson reads a closing bracket
  // there (the first padding byte) as a sign the document may be
  // unbalanced, which a cut piece always is.
  sealed_bytes_[0] = d[cut];
  sealed_bytes_[1] = d[cut + 1];
  d[cut] = closer;
  d[cut + 1] = ' ';
  const size_t capacity =
      static_cast<size_t>(buf_.get() + 2 + cap_ + simdjson::SIMDJSON_PADDING - (d - 1));
  return parser_.iterate(d - 1, cut + 2, capacity).get(*doc);
}

size_t Stream::Where(od::document& doc, size_t cut) const {
  const char* at = nullptr;
  if (doc.current_location().get(at) != simdjson::SUCCESS || at == nullptr) return cut;
  const char* d = data();
  if (at < d) return 0;
  return std::min(static_cast<size_t>(at - d), cut);
}

absl::Status Stream::Members(bool after_events) {
  while (true) {
    const size_t cut = eof_ ? held() : FindCut();
    if (cut == 0 && !eof_) {
      if (held() >= kMaxHeldBytes) return TooLarge("the top-level members before traceEvents");
      ReadMore(std::max(piece_bytes_, held()));
      continue;
    }
    visitor_->SaveTop();
    visitor_->SetPiece(data(), base_);
    od::document doc;
    simdjson::error_code e = Seal('{', '}', cut, &doc);
    if (e != simdjson::SUCCESS) {
      Unseal(cut);
      visitor_->RestoreTop();
      return Malformed(0, simdjson::error_message(e));
    }
    size_t events_at = kNone;
    bool not_array = false;
    od::object top;
    e = doc.get_object().get(top);
    if (e == simdjson::SUCCESS) {
      for (auto member : top) {
        od::field field;
        if ((e = std::move(member).get(field)) != simdjson::SUCCESS) break;
        std::string_view key;
        if ((e = KeyOf(field, &key)) != simdjson::SUCCESS) break;
        if (Is(key, "traceEvents")) {
          od::json_type type;
          if ((e = field.value().type().get(type)) != simdjson::SUCCESS) break;
          const std::string_view token = field.value().raw_json_token();
          events_at = static_cast<size_t>(token.data() - data());
          not_array = type != od::json_type::array;
          break;
        }
        if ((e = visitor_->OnTopMember(key, field.value())) != simdjson::SUCCESS) {
          if (absl::Status stopped = visitor_->Stopped(); !stopped.ok()) return stopped;
          break;
        }
      }
    }
    const size_t at = Where(doc, cut);
    // The object closed by the document's own brace when the parse stopped
    // before the closer; by the closer (the piece ended early) when it ran
    // past it.
    const char* stop = nullptr;
    const bool closed_here = e == simdjson::SUCCESS && events_at == kNone &&
                             doc.current_location().get(stop) == simdjson::SUCCESS;
    Unseal(cut);
    if (events_at != kNone) {
      if (after_events) return NotATrace("a second traceEvents", events_at);
      if (not_array) return NotATrace("traceEvents is not an array", events_at);
      Drop(events_at + 1);
      return absl::OkStatus();
    }
    if (closed_here) {
      if (at < cut) return NotATrace("content after the top-level object", at);
      if (!after_events) return NotATrace("no traceEvents array before the object's end", at);
      return absl::OkStatus();
    }
    if (e == simdjson::SUCCESS) e = simdjson::INCOMPLETE_ARRAY_OR_OBJECT;
    visitor_->RestoreTop();
    if (at < cut) return Malformed(at, simdjson::error_message(e));
    if (eof_) return Malformed(held(), "the file ends inside the top-level object");
    if (held() >= kMaxHeldBytes) return TooLarge("the top-level members before traceEvents");
    ReadMore(std::max(piece_bytes_, held()));
  }
}

absl::Status Stream::Events() {
  bool expect_comma = false, after_comma = false;
  while (true) {
    if (!SkipSpace()) return Malformed(held(), "the file ends inside traceEvents");
    const char c = data()[0];
    if (expect_comma) {
      if (c == ',') {
        Drop(1);
        expect_comma = false;
        after_comma = true;
        continue;
      }
      if (c == ']') {
        Drop(1);
        return absl::OkStatus();
      }
      return Malformed(0, "expected ',' or ']' after a traceEvents element");
    }
    if (c == ']') {
      if (after_comma) return Malformed(0, "a comma before the end of traceEvents");
      Drop(1);
      return absl::OkStatus();
    }
    if (c != '{') return NotATrace("a traceEvents element is not an object", 0);
    const size_t cut = eof_ ? held() : FindCut();
    if (cut == 0) {
      if (held() >= kMaxHeldBytes) return TooLarge("the traceEvents element");
      ReadMore(std::max(piece_bytes_, held()));
      continue;
    }
    visitor_->SetPiece(data(), base_);
    od::document doc;
    simdjson::error_code e = Seal('[', ']', cut, &doc);
    if (e != simdjson::SUCCESS) {
      Unseal(cut);
      return Malformed(0, simdjson::error_message(e));
    }
    size_t delivered = 0, resume = 0;
    bool not_object = false;
    od::array elements;
    e = doc.get_array().get(elements);
    if (e == simdjson::SUCCESS) {
      for (auto element : elements) {
        od::value value;
        if ((e = element.get(value)) != simdjson::SUCCESS) break;
        od::object event;
        if ((e = value.get_object().get(event)) != simdjson::SUCCESS) {
          not_object = e == simdjson::INCORRECT_TYPE;
          break;
        }
        if ((e = visitor_->OnEvent(event)) != simdjson::SUCCESS) {
          if (absl::Status stopped = visitor_->Stopped(); !stopped.ok()) return stopped;
          break;
        }
        ++delivered;
        resume = Where(doc, cut);  // the `,` or `]` after it
      }
    }
    const size_t at = e == simdjson::SUCCESS ? resume : Where(doc, cut);
    Unseal(cut);
    after_comma = false;
    if (e == simdjson::SUCCESS) {
      if (at < cut) {  // traceEvents' own `]`
        Drop(at + 1);
        return absl::OkStatus();
      }
      Drop(cut);
      expect_comma = true;
      continue;
    }
    if (at < cut) {
      if (data()[at] == ']') return Malformed(at, "a comma before the end of traceEvents");
      if (not_object) return NotATrace("a traceEvents element is not an object", at);
      return Malformed(at, simdjson::error_message(e));
    }
    // The piece ended inside an element: it starts the next piece.
    if (eof_) return Malformed(held(), "the file ends inside traceEvents");
    if (delivered > 0) {
      Drop(resume);
      expect_comma = true;
      ReadMore(piece_bytes_);
      continue;
    }
    if (held() >= kMaxHeldBytes) return TooLarge("the traceEvents element");
    ReadMore(std::max(piece_bytes_, held()));
  }
}

absl::Status Stream::AfterEvents() {
  while (!eof_) {
    if (held() >= kMaxHeldBytes) return TooLarge("the top-level members after traceEvents");
    ReadMore(piece_bytes_);
  }
  if (!SkipSpace()) return Malformed(held(), "the file ends before the top-level object closes");
  if (data()[0] == '}') {
    Drop(1);
    if (SkipSpace()) return NotATrace("content after the top-level object", 0);
    return absl::OkStatus();
  }
  if (data()[0] != ',') return Malformed(0, "expected ',' or '}' after traceEvents");
  Drop(1);
  return Members(/*after_events=*/true);
}

absl::Status Stream::Run() {
  ReadMore(piece_bytes_);
  if (held() >= 3 && std::memcmp(data(), "\xEF\xBB\xBF", 3) == 0) Drop(3);  // a UTF-8 BOM
  if (!SkipSpace()) return Malformed(0, "no JSON document");
  if (data()[0] != '{') return NotATrace("the top level is not an object", 0);
  Drop(1);
  if (absl::Status s = Members(/*after_events=*/false); !s.ok()) return s;
  if (absl::Status s = Events(); !s.ok()) return s;
  return AfterEvents();
}

}  // namespace

absl::Status StreamTraceJson(TraceInput* input, TraceJsonVisitor* visitor, size_t piece_bytes) {
  Stream stream(input, visitor, piece_bytes);
  return stream.Run();
}

}  // namespace gpuctl::analysis
