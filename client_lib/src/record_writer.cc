#include "client_lib/src/record_writer.h"

#include <algorithm>

#include "gpuctl/v1/record_codec.h"

namespace gpuctl::client {

uint32_t RecordWriter::InternString(std::string_view s) {
  s = s.substr(0, std::min<size_t>(s.size(), records::kMaxStringLength));
  auto [it, inserted] =
      string_index_.try_emplace(std::string(s), static_cast<uint32_t>(string_index_.size()));
  if (inserted) {
    // Length, bytes, zero padding to a multiple of 4.
    const size_t at = strings_.size();
    strings_.resize(at + 4 + ((s.size() + 3) & ~size_t{3}));
    records::StoreField(Bytes(strings_, at), static_cast<uint32_t>(s.size()));
    std::copy(s.begin(), s.end(), strings_.begin() + static_cast<ptrdiff_t>(at + 4));
  }
  return it->second;
}

void RecordWriter::AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns, uint32_t name,
                            uint32_t depth, uint64_t range_id) {
  Add(records::RangeRecord{tid, start_ns, end_ns, name, depth, range_id});
}

void RecordWriter::AddStep(uint32_t tid, int64_t ts_ns, uint64_t step) {
  Add(records::StepRecord{tid, ts_ns, step});
}

void RecordWriter::AddThreadName(uint32_t tid, uint32_t name) {
  Add(records::ThreadNameRecord{tid, name});
}

uint64_t RecordWriter::PayloadSize() const {
  return records::kHeaderSize + events_.size() + strings_.size();
}

std::string RecordWriter::Finish(const PayloadHeaderInfo& info) {
  records::PayloadHeader h;
  h.magic = records::kMagic;
  h.version_major = records::kVersionMajor;
  h.version_minor = records::kVersionMinor;
  h.header_size = records::kHeaderSize;
  h.event_count = event_count_;
  h.events_offset = records::kHeaderSize;
  h.events_size = events_.size();
  h.strings_offset = h.events_offset + events_.size();
  h.strings_size = strings_.size();
  h.string_count = string_index_.size();
  h.dropped_events = info.dropped_events;
  h.window_start_ns = info.window_start_ns;
  h.window_end_ns = info.window_end_ns;
  h.pid = info.pid;
  std::string out;
  out.reserve(PayloadSize());
  out.resize(records::kHeaderSize);
  records::EncodeHeader(h, Bytes(out, 0));
  out.append(events_);
  out.append(strings_);
  events_.clear();
  strings_.clear();
  string_index_.clear();
  event_count_ = 0;
  return out;
}

}  // namespace gpuctl::client
