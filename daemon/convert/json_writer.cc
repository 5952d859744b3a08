#include "daemon/convert/json_writer.h"

#include "absl/strings/str_cat.h"

namespace gpuctl::daemon {
namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr absl::string_view kReplacement = "\\ufffd";

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one
// (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF).
size_t ValidUtf8Length(absl::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t left = s.size() - i;
  auto cont = [&](size_t k) { return (byte(k) & 0xc0) == 0x80; };
  if (c >= 0xc2 && c <= 0xdf) return left >= 2 && cont(i + 1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (left < 3 || !cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xe0 && byte(i + 1) < 0xa0) return 0;   // overlong
    if (c == 0xed && byte(i + 1) >= 0xa0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (left < 4 || !cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xf0 && byte(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xf4 && byte(i + 1) >= 0x90) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t n = ValidUtf8Length(s, i);
      if (n == 0) {
        out->append(kReplacement.data(), kReplacement.size());
        ++i;
      } else {
        out->append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

std::string RepairUtf8(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t n = static_cast<unsigned char>(s[i]) < 0x80 ? 1 : ValidUtf8Length(s, i);
    if (n == 0) {
      out.append("\xef\xbf\xbd");
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

void AppendMicrosFromNanos(std::string* out, int64_t ns) {
  // Work in unsigned magnitude so INT64_MIN is representable.
  uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (ns < 0) out->push_back('-');
  absl::StrAppend(out, mag / 1000, ".");
  uint64_t frac = mag % 1000;
  out->push_back(static_cast<char>('0' + frac / 100));
  out->push_back(static_cast<char>('0' + (frac / 10) % 10));
  out->push_back(static_cast<char>('0' + frac % 10));
}

}  // namespace gpuctl::daemon
