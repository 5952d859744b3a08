#include "daemon/common/excerpt.h"

#include "absl/strings/str_cat.h"

namespace gpuctl {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// The longest prefix of `text` of at most `max_bytes` bytes that does not
// end inside a UTF-8 sequence. Bytes that are not UTF-8 count as
// characters of their own: at most 3 bytes are given back.
absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  for (int back = 0; back < 3 && cut > 0 && IsContinuationByte(text[cut]); ++back) --cut;
  if (IsContinuationByte(text[cut])) cut = max_bytes;
  return text.substr(0, cut);
}

std::string Truncated(absl::string_view prefix, size_t original_size) {
  return absl::StrCat(prefix, "... (", original_size, " bytes)");
}

}  // namespace

std::string Excerpt(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  return Truncated(Utf8Prefix(text, max_bytes), text.size());
}

std::string ClampMessage(absl::string_view message, size_t max_bytes) {
  if (message.size() <= max_bytes) return std::string(message);
  const size_t suffix = Truncated("", message.size()).size();
  const size_t room = max_bytes > suffix ? max_bytes - suffix : 0;
  return Truncated(Utf8Prefix(message, room), message.size());
}

}  // namespace gpuctl
