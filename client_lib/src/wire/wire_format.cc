#include "client_lib/src/wire/wire_format.h"

namespace gpuctl::wire {
namespace {

// libprotobuf refuses lengths this close to INT32_MAX (ParseContext slop).
constexpr uint64_t kMaxLength = 0x7fffffffu - 16;
constexpr size_t kMaxTagBytes = 5;
constexpr size_t kMaxLengthBytes = 5;

struct Utf8Sequence {
  bool valid;
  // Valid: bytes in the sequence. Invalid: bytes of the longest prefix that
  // could have started a valid sequence (at least 1), the unit replaced by
  // one U+FFFD.
  size_t length;
};

// Unicode 15, table 3-7 (well-formed UTF-8 byte sequences).
Utf8Sequence NextUtf8Sequence(std::string_view bytes, size_t pos) {
  const auto byte_at = [&](size_t i) -> unsigned { return static_cast<unsigned char>(bytes[i]); };
  const unsigned lead = byte_at(pos);
  if (lead < 0x80) {
    return {true, 1};
  }
  size_t count;
  unsigned second_low = 0x80, second_high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    count = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    count = 3;
    if (lead == 0xe0) {
      second_low = 0xa0;
    }
    if (lead == 0xed) {
      second_high = 0x9f;
    }
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    count = 4;
    if (lead == 0xf0) {
      second_low = 0x90;
    }
    if (lead == 0xf4) {
      second_high = 0x8f;
    }
  } else {
    return {false, 1};
  }
  for (size_t i = 1; i < count; ++i) {
    if (pos + i >= bytes.size()) {
      return {false, i};
    }
    const unsigned next = byte_at(pos + i);
    const unsigned low = i == 1 ? second_low : 0x80;
    const unsigned high = i == 1 ? second_high : 0xbf;
    if (next < low || next > high) {
      return {false, i};
    }
  }
  return {true, count};
}

}  // namespace

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

void StringSink::PutVarint(uint64_t value) {
  char buffer[kMaxVarintBytes];
  size_t size = 0;
  while (value >= 0x80) {
    buffer[size++] = static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  buffer[size++] = static_cast<char>(value);
  out_->append(buffer, size);
}

bool WireReader::ReadVarint(uint64_t* value) {
  uint64_t result = 0;
  for (size_t i = 0; i < kMaxVarintBytes; ++i) {
    if (pos_ == input_.size()) {
      return false;
    }
    const uint64_t byte = static_cast<unsigned char>(input_[pos_++]);
    // At i == 9 the shift is 63: only the lowest payload bit survives, as in
    // protobuf; the rest of the tenth byte is dropped.
    result |= (byte & 0x7f) << (7 * i);
    if (byte < 0x80) {
      *value = result;
      return true;
    }
  }
  return false;
}

bool WireReader::ReadTag(uint32_t* field_number, WireType* type) {
  uint32_t tag = 0;
  for (size_t i = 0;; ++i) {
    if (i == kMaxTagBytes || pos_ == input_.size()) {
      return false;
    }
    const uint32_t byte = static_cast<unsigned char>(input_[pos_++]);
    tag |= (byte & 0x7f) << (7 * i);  // bits past 32 drop out of the uint32
    if (byte < 0x80) {
      break;
    }
  }
  const uint32_t wire_type = tag & 7;
  *field_number = tag >> 3;
  if (*field_number == 0) {
    return false;
  }
  switch (wire_type) {
    case 0:
    case 1:
    case 2:
    case 5:
      *type = static_cast<WireType>(wire_type);
      return true;
    default:
      return false;
  }
}

bool WireReader::ReadLength(size_t* length) {
  uint64_t value = 0;
  for (size_t i = 0;; ++i) {
    if (i == kMaxLengthBytes || pos_ == input_.size()) {
      return false;
    }
    const uint64_t byte = static_cast<unsigned char>(input_[pos_++]);
    value |= (byte & 0x7f) << (7 * i);
    if (byte < 0x80) {
      break;
    }
  }
  if (value > kMaxLength || value > input_.size() - pos_) {
    return false;
  }
  *length = static_cast<size_t>(value);
  return true;
}

bool WireReader::ReadLengthDelimited(std::string_view* bytes) {
  size_t length = 0;
  if (!ReadLength(&length)) {
    return false;
  }
  // ReadLength checked pos_ + length <= size.
  *bytes = std::string_view(input_.data() + pos_, length);
  pos_ += length;
  return true;
}

bool WireReader::ReadLittleEndian(size_t bytes, uint64_t* value) {
  if (input_.size() - pos_ < bytes) {
    return false;
  }
  uint64_t result = 0;
  for (size_t i = 0; i < bytes; ++i) {
    result |= static_cast<uint64_t>(static_cast<unsigned char>(input_[pos_ + i])) << (8 * i);
  }
  pos_ += bytes;
  *value = result;
  return true;
}

bool WireReader::ReadFixed32(uint32_t* value) {
  uint64_t wide = 0;
  if (!ReadLittleEndian(4, &wide)) {
    return false;
  }
  *value = static_cast<uint32_t>(wide);
  return true;
}

bool WireReader::ReadFixed64(uint64_t* value) { return ReadLittleEndian(8, value); }

bool WireReader::ReadField(WireField* field) {
  if (!ReadTag(&field->field_number, &field->type)) {
    return false;
  }
  field->number_value = 0;
  field->bytes = {};
  switch (field->type) {
    case WireType::kVarint:
      return ReadVarint(&field->number_value);
    case WireType::kFixed64:
      return ReadFixed64(&field->number_value);
    case WireType::kFixed32: {
      uint32_t value = 0;
      if (!ReadFixed32(&value)) {
        return false;
      }
      field->number_value = value;
      return true;
    }
    case WireType::kLengthDelimited:
      return ReadLengthDelimited(&field->bytes);
    case WireType::kStartGroup:
    case WireType::kEndGroup:
      break;
  }
  return false;
}

bool IsValidUtf8(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // ASCII runs are the common case in hostnames, ids and command lines.
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Sequence sequence = NextUtf8Sequence(bytes, pos);
    if (!sequence.valid) {
      return false;
    }
    pos += sequence.length;
  }
  return true;
}

std::string ToValidUtf8(std::string_view bytes) {
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Sequence sequence = NextUtf8Sequence(bytes, pos);
    if (sequence.valid) {
      out.append(bytes.substr(pos, sequence.length));
    } else {
      out.append(kReplacement);
    }
    pos += sequence.length;
  }
  return out;
}

}  // namespace gpuctl::wire
