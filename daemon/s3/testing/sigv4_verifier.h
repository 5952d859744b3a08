#ifndef GPUCTL_DAEMON_S3_TESTING_SIGV4_VERIFIER_H_
#define GPUCTL_DAEMON_S3_TESTING_SIGV4_VERIFIER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/s3/testing/loopback_http_server.h"

namespace gpuctl::s3::testing {

// The SignedHeaders list of the request's Authorization header.
std::vector<std::string> SignedHeaders(const RecordedRequest& request);

// The Authorization header AWS SigV4 (service "s3") gives `request`,
// computed from the recorded wire form with OpenSSL's HMAC, independently
// of libcurl: the canonical request takes the method, the raw path and
// query, the headers that SignedHeaders lists, and x-amz-content-sha256 as
// the payload hash; the date comes from x-amz-date.
std::string ExpectedSigV4Authorization(const RecordedRequest& request,
                                       absl::string_view access_key_id,
                                       absl::string_view secret_access_key,
                                       absl::string_view region);

}  // namespace gpuctl::s3::testing

#endif  // GPUCTL_DAEMON_S3_TESTING_SIGV4_VERIFIER_H_
