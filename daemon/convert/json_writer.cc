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

// Whether `c` (< 0x80) goes into a JSON string as itself.
constexpr bool IsPlainAscii(unsigned char c) { return c >= 0x20 && c != '"' && c != '\\'; }

// The escape of an ASCII byte that needs one.
void AppendEscape(std::string* out, unsigned char c) {
  switch (c) {
    case '"':
      out->append("\\\"", 2);
      return;
    case '\\':
      out->append("\\\\", 2);
      return;
    case '\n':
      out->append("\\n", 2);
      return;
    case '\r':
      out->append("\\r", 2);
      return;
    case '\t':
      out->append("\\t", 2);
      return;
    case '\b':
      out->append("\\b", 2);
      return;
    case '\f':
      out->append("\\f", 2);
      return;
    default: {
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
      out->append(esc, sizeof(esc));
    }
  }
}

}  // namespace

void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    // Names are almost always plain ASCII: copy each plain run at once.
    size_t run = i;
    while (run < s.size() && static_cast<unsigned char>(s[run]) < 0x80 &&
           IsPlainAscii(static_cast<unsigned char>(s[run]))) {
      ++run;
    }
    if (run > i) {
      out->append(s.data() + i, run - i);
      i = run;
      if (i == s.size()) break;
    }
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      AppendEscape(out, c);
      ++i;
      continue;
    }
    size_t n = ValidUtf8Length(s, i);
    if (n == 0) {
      out->append(kReplacement.data(), kReplacement.size());
      ++i;
    } else {
      out->append(s.data() + i, n);
      i += n;
    }
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
  // Work in unsigned magnitude so INT64_MIN is representable. Digits are
  // written backwards into one buffer and appended once.
  uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char buf[32];
  char* end = buf + sizeof(buf);
  char* p = end;
  uint64_t frac = mag % 1000;
  *--p = static_cast<char>('0' + frac % 10);
  *--p = static_cast<char>('0' + (frac / 10) % 10);
  *--p = static_cast<char>('0' + frac / 100);
  *--p = '.';
  uint64_t whole = mag / 1000;
  do {
    *--p = static_cast<char>('0' + whole % 10);
    whole /= 10;
  } while (whole != 0);
  if (ns < 0) *--p = '-';
  out->append(p, static_cast<size_t>(end - p));
}

}  // namespace gpuctl::daemon
