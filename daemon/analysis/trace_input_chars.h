#ifndef GPUCTL_DAEMON_ANALYSIS_TRACE_INPUT_CHARS_H_
#define GPUCTL_DAEMON_ANALYSIS_TRACE_INPUT_CHARS_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>

#include "daemon/analysis/trace_input.h"

namespace gpuctl::analysis {

// A TraceInput's decompressed bytes, buffered, as a character source for
// nlohmann::json's SAX parser (the merge reads traces this way). Does not own the input.
class TraceInputChars {
 public:
  explicit TraceInputChars(TraceInput* input)
      : input_(input), buffer_(new char[kBufferBytes]) {}  // not zeroed
  bool AtEnd() {
    if (pos_ < len_) return false;
    base_ += len_;
    pos_ = 0;
    len_ = input_->Read(buffer_.get(), kBufferBytes);
    return len_ == 0;
  }
  char Peek() const { return buffer_[pos_]; }
  void Advance() { ++pos_; }
  // Decompressed bytes consumed so far: where a parse error is.
  uint64_t offset() const { return base_ + pos_; }

 private:
  static constexpr size_t kBufferBytes = size_t{256} << 10;
  TraceInput* input_;
  std::unique_ptr<char[]> buffer_;
  size_t pos_ = 0, len_ = 0;
  uint64_t base_ = 0;
};

// An input iterator over TraceInputChars; the default one is the end.
class TraceInputIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  TraceInputIterator() = default;
  explicit TraceInputIterator(TraceInputChars* chars) : chars_(chars) {}
  char operator*() const { return chars_->Peek(); }
  TraceInputIterator& operator++() {
    chars_->Advance();
    return *this;
  }
  TraceInputIterator operator++(int) {
    TraceInputIterator before = *this;
    chars_->Advance();
    return before;
  }
  bool operator==(const TraceInputIterator& other) const { return AtEnd() == other.AtEnd(); }
  bool operator!=(const TraceInputIterator& other) const { return !(*this == other); }

 private:
  bool AtEnd() const { return chars_ == nullptr || chars_->AtEnd(); }
  TraceInputChars* chars_ = nullptr;
};

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_TRACE_INPUT_CHARS_H_
