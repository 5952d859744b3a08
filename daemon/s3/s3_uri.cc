#include "daemon/s3/s3_uri.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"

namespace gpuctl::s3 {

std::string UriEncode(absl::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    }
  }
  return out;
}

std::string CanonicalQuery(QueryParams params) {
  for (auto& [name, value] : params) {
    name = UriEncode(name, false);
    value = UriEncode(value, false);
  }
  std::sort(params.begin(), params.end());
  return absl::StrJoin(params, "&", absl::PairFormatter("="));
}

}  // namespace gpuctl::s3
