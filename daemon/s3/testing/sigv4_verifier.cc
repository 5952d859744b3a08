#include "daemon/s3/testing/sigv4_verifier.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/s3/object_body.h"

namespace gpuctl::s3::testing {
namespace {

std::string Hmac(absl::string_view key, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): OpenSSL takes bytes
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string Hex(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(kDigits[u >> 4]);
    out.push_back(kDigits[u & 0xf]);
  }
  return out;
}

// Trimmed, inner runs of spaces collapsed, repeated headers joined by ','.
std::string CanonicalValue(const RecordedRequest& request, absl::string_view name) {
  std::vector<std::string> values;
  for (const auto& [k, v] : request.headers) {
    if (k != name) continue;
    std::string value(absl::StripAsciiWhitespace(v));
    absl::RemoveExtraAsciiWhitespace(&value);
    values.push_back(std::move(value));
  }
  return absl::StrJoin(values, ",");
}

}  // namespace

std::vector<std::string> SignedHeaders(const RecordedRequest& request) {
  std::string auth = request.Header("authorization");
  size_t at = auth.find("SignedHeaders=");
  if (at == std::string::npos) return {};
  absl::string_view list = absl::string_view(auth).substr(at + 14);
  list = list.substr(0, list.find(','));
  return absl::StrSplit(list, ';');
}

std::string ExpectedSigV4Authorization(const RecordedRequest& request,
                                       absl::string_view access_key_id,
                                       absl::string_view secret_access_key,
                                       absl::string_view region) {
  const std::vector<std::string> signed_headers = SignedHeaders(request);
  const std::string date_time = request.Header("x-amz-date");
  const std::string date = date_time.substr(0, 8);
  std::string canonical =
      absl::StrCat(request.method, "\n", request.path, "\n", request.query, "\n");
  for (const std::string& name : signed_headers) {
    absl::StrAppend(&canonical, name, ":", CanonicalValue(request, name), "\n");
  }
  const std::string signed_list = absl::StrJoin(signed_headers, ";");
  absl::StrAppend(&canonical, "\n", signed_list, "\n", request.Header("x-amz-content-sha256"));
  const std::string scope = absl::StrCat(date, "/", region, "/s3/aws4_request");
  const std::string to_sign =
      absl::StrCat("AWS4-HMAC-SHA256\n", date_time, "\n", scope, "\n", Sha256Hex(canonical));
  std::string key = Hmac(absl::StrCat("AWS4", secret_access_key), date);
  key = Hmac(key, region);
  key = Hmac(key, "s3");
  key = Hmac(key, "aws4_request");
  return absl::StrCat("AWS4-HMAC-SHA256 Credential=", access_key_id, "/", scope,
                      ", SignedHeaders=", signed_list, ", Signature=", Hex(Hmac(key, to_sign)));
}

}  // namespace gpuctl::s3::testing
