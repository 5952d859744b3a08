#include "client_lib/src/record_writer.h"

#include <algorithm>

#include "gpuctl/v1/records.h"

namespace gpuctl::client {
namespace {

void AppendRecordPrefix(std::string* out, records::Kind kind, uint16_t size) {
  AppendU16(out, static_cast<uint16_t>(kind));
  AppendU16(out, size);
}

void PadTo4(std::string* out) {
  while (out->size() % 4 != 0) out->push_back('\0');
}

}  // namespace

void AppendU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>((v >> 8) & 0xff));
}

void AppendU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void AppendU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t RecordWriter::InternString(std::string_view s) {
  s = s.substr(0, std::min<size_t>(s.size(), records::kMaxStringLength));
  auto [it, inserted] =
      string_index_.try_emplace(std::string(s), static_cast<uint32_t>(string_index_.size()));
  if (inserted) {
    AppendU32(&strings_, static_cast<uint32_t>(s.size()));
    strings_.append(s);
    PadTo4(&strings_);
  }
  return it->second;
}

void RecordWriter::AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns, uint32_t name,
                            uint32_t depth, uint64_t range_id) {
  AppendRecordPrefix(&events_, records::Kind::kRange, records::kRangeSize);
  AppendU32(&events_, tid);
  AppendI64(&events_, start_ns);
  AppendI64(&events_, end_ns);
  AppendU32(&events_, name);
  AppendU32(&events_, depth);
  AppendU64(&events_, range_id);
  ++event_count_;
}

void RecordWriter::AddStep(uint32_t tid, int64_t ts_ns, uint64_t step) {
  AppendRecordPrefix(&events_, records::Kind::kStep, records::kStepSize);
  AppendU32(&events_, tid);
  AppendI64(&events_, ts_ns);
  AppendU64(&events_, step);
  ++event_count_;
}

void RecordWriter::AddThreadName(uint32_t tid, uint32_t name) {
  AppendRecordPrefix(&events_, records::Kind::kThreadName, records::kThreadNameSize);
  AppendU32(&events_, tid);
  AppendU32(&events_, name);
  AppendU32(&events_, 0);
  ++event_count_;
}

void RecordWriter::BeginRecord(uint16_t kind, uint16_t size) {
  AppendU16(&events_, kind);
  AppendU16(&events_, size);
  ++event_count_;
}

uint64_t RecordWriter::PayloadSize() const {
  return records::kHeaderSize + events_.size() + strings_.size();
}

std::string RecordWriter::Finish(const PayloadHeaderInfo& info) {
  const uint64_t events_offset = records::kHeaderSize;
  const uint64_t strings_offset = events_offset + events_.size();
  std::string out;
  out.reserve(PayloadSize());
  AppendU32(&out, records::kMagic);
  AppendU16(&out, records::kVersionMajor);
  AppendU16(&out, records::kVersionMinor);
  AppendU32(&out, records::kHeaderSize);
  AppendU32(&out, 0);  // flags
  AppendU64(&out, event_count_);
  AppendU64(&out, events_offset);
  AppendU64(&out, events_.size());
  AppendU64(&out, strings_offset);
  AppendU64(&out, strings_.size());
  AppendU64(&out, string_index_.size());
  AppendU64(&out, info.dropped_events);
  AppendI64(&out, info.window_start_ns);
  AppendI64(&out, info.window_end_ns);
  AppendU32(&out, static_cast<uint32_t>(info.pid));
  AppendU32(&out, 0);  // reserved
  out.append(events_);
  out.append(strings_);
  events_.clear();
  strings_.clear();
  string_index_.clear();
  event_count_ = 0;
  return out;
}

}  // namespace gpuctl::client
