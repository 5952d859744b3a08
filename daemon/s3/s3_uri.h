#ifndef GPUCTL_DAEMON_S3_S3_URI_H_
#define GPUCTL_DAEMON_S3_S3_URI_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpuctl::s3 {

// RFC 3986 percent-encoding as SigV4 canonicalizes it: the unreserved
// characters A-Z a-z 0-9 - . _ ~ stay, every other byte becomes %XX with
// uppercase hex; '/' stays too when `keep_slash` (object key paths).
std::string UriEncode(absl::string_view s, bool keep_slash);

using QueryParams = std::vector<std::pair<std::string, std::string>>;

// The SigV4 canonical query string: names and values encoded as above,
// sorted by encoded name then value, joined as "a=1&b=2". A parameter
// without a value is "name=" ("uploads="). libcurl signs the query exactly
// as it appears in the URL, so requests must carry it in this form.
std::string CanonicalQuery(QueryParams params);

}  // namespace gpuctl::s3

#endif  // GPUCTL_DAEMON_S3_S3_URI_H_
