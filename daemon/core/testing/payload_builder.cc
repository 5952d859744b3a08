#include "daemon/core/testing/payload_builder.h"

#include "gpuctl/v1/records.h"

namespace gpuctl::testing {
namespace {

void Append16(std::vector<uint8_t>* out, uint16_t v) {
  size_t at = out->size();
  out->resize(at + 2);
  Store16(out, at, v);
}
void Append32(std::vector<uint8_t>* out, uint32_t v) {
  size_t at = out->size();
  out->resize(at + 4);
  Store32(out, at, v);
}
void Append64(std::vector<uint8_t>* out, uint64_t v) {
  size_t at = out->size();
  out->resize(at + 8);
  Store64(out, at, v);
}

}  // namespace

void Store16(std::vector<uint8_t>* out, size_t at, uint16_t v) {
  (*out)[at] = static_cast<uint8_t>(v);
  (*out)[at + 1] = static_cast<uint8_t>(v >> 8);
}
void Store32(std::vector<uint8_t>* out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void Store64(std::vector<uint8_t>* out, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*out)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

PayloadBuilder::PayloadBuilder(int32_t pid, int64_t window_start_ns, int64_t window_end_ns)
    : pid_(pid),
      window_start_ns_(window_start_ns),
      window_end_ns_(window_end_ns),
      major_(records::kVersionMajor),
      minor_(records::kVersionMinor) {}

uint32_t PayloadBuilder::AddString(absl::string_view s) {
  Append32(&strings_, static_cast<uint32_t>(s.size()));
  strings_.insert(strings_.end(), s.begin(), s.end());
  while (strings_.size() % 4 != 0) strings_.push_back(0);
  return static_cast<uint32_t>(string_count_++);
}

void PayloadBuilder::AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns, uint32_t name,
                              uint32_t depth, uint64_t range_id) {
  Append16(&events_, static_cast<uint16_t>(records::Kind::kRange));
  Append16(&events_, records::kRangeSize);
  Append32(&events_, tid);
  Append64(&events_, static_cast<uint64_t>(start_ns));
  Append64(&events_, static_cast<uint64_t>(end_ns));
  Append32(&events_, name);
  Append32(&events_, depth);
  Append64(&events_, range_id);
  ++event_count_;
}

void PayloadBuilder::AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns,
                              absl::string_view name, uint32_t depth, uint64_t range_id) {
  AddRange(tid, start_ns, end_ns, AddString(name), depth, range_id);
}

void PayloadBuilder::AddStep(uint32_t tid, int64_t ts_ns, uint64_t step) {
  Append16(&events_, static_cast<uint16_t>(records::Kind::kStep));
  Append16(&events_, records::kStepSize);
  Append32(&events_, tid);
  Append64(&events_, static_cast<uint64_t>(ts_ns));
  Append64(&events_, step);
  ++event_count_;
}

void PayloadBuilder::AddThreadName(uint32_t tid, absl::string_view name) {
  uint32_t index = AddString(name);
  Append16(&events_, static_cast<uint16_t>(records::Kind::kThreadName));
  Append16(&events_, records::kThreadNameSize);
  Append32(&events_, tid);
  Append32(&events_, index);
  Append32(&events_, 0);
  ++event_count_;
}

void PayloadBuilder::AddRawRecord(uint16_t kind, const std::vector<uint8_t>& body) {
  size_t size = (4 + body.size() + 3) & ~size_t{3};
  Append16(&events_, kind);
  Append16(&events_, static_cast<uint16_t>(size));
  events_.insert(events_.end(), body.begin(), body.end());
  while (events_.size() % 4 != 0) events_.push_back(0);
  ++event_count_;
}

std::vector<uint8_t> PayloadBuilder::Build() const {
  const uint64_t header_size = records::kHeaderSize + extra_header_;
  const uint64_t events_offset = header_size;
  const uint64_t strings_offset = events_offset + events_.size();
  std::vector<uint8_t> out(header_size, 0);
  Store32(&out, 0, records::kMagic);
  Store16(&out, 4, major_);
  Store16(&out, 6, minor_);
  Store32(&out, 8, static_cast<uint32_t>(header_size));
  Store32(&out, 12, 0);
  Store64(&out, 16, event_count_);
  Store64(&out, 24, events_offset);
  Store64(&out, 32, events_.size());
  Store64(&out, 40, strings_offset);
  Store64(&out, 48, strings_.size());
  Store64(&out, 56, string_count_);
  Store64(&out, 64, dropped_events_);
  Store64(&out, 72, static_cast<uint64_t>(window_start_ns_));
  Store64(&out, 80, static_cast<uint64_t>(window_end_ns_));
  Store32(&out, 88, static_cast<uint32_t>(pid_));
  Store32(&out, 92, 0);
  out.insert(out.end(), events_.begin(), events_.end());
  out.insert(out.end(), strings_.begin(), strings_.end());
  return out;
}

}  // namespace gpuctl::testing
