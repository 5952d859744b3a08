#include "daemon/s3/http_transport.h"

#include <libxml/parser.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/base/call_once.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"

namespace gpuctl::s3 {
namespace {

// Idle handles kept for reuse; each holds its own small connection cache.
constexpr size_t kMaxIdleHandles = 16;

// Per-call state the libcurl callbacks reach through their user pointer.
struct Exchange {
  const HttpRequest* request;
  HttpResponse* response;
  uint64_t upload_pos = 0;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t total = size * count;
  absl::string_view line = absl::StripTrailingAsciiWhitespace(absl::string_view(data, total));
  if (absl::StartsWith(line, "HTTP/")) {
    // A new response begins (after a "100 Continue", say): forget the last.
    ex->response->headers.clear();
    ex->response->status = 0;
    size_t space = line.find(' ');
    int status = 0;
    if (space != absl::string_view::npos && absl::SimpleAtoi(line.substr(space + 1, 3), &status)) {
      ex->response->status = status;
    }
    return total;
  }
  size_t colon = line.find(':');
  if (colon == absl::string_view::npos || colon == 0) return total;
  std::string name = absl::AsciiStrToLower(line.substr(0, colon));
  absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  std::string& slot = ex->response->headers[name];
  slot = slot.empty() ? std::string(value) : absl::StrCat(slot, ",", value);
  return total;
}

size_t OnWrite(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t total = size * count;
  HttpResponse& response = *ex->response;
  const bool success = response.status >= 200 && response.status < 300;
  if (success && ex->request->on_body) {
    if (!ex->request->on_body(response, absl::string_view(data, total))) {
      response.aborted_by_receiver = true;
      return 0;  // CURLE_WRITE_ERROR
    }
    response.body_bytes_received += total;
    return total;
  }
  size_t room = ex->request->max_body - std::min(ex->request->max_body, response.body.size());
  if (total > room) response.body_truncated = true;
  response.body.append(data, std::min(total, room));
  return total;
}

size_t OnRead(char* buf, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const HttpRequest& req = *ex->request;
  uint64_t want = std::min<uint64_t>(size * count, req.body_length - ex->upload_pos);
  if (want == 0) return 0;
  auto n = req.body->ReadAt(req.body_offset + ex->upload_pos, buf, want);
  if (!n.ok() || *n == 0) {
    ex->response->body_error =
        n.ok() ? absl::DataLossError(absl::StrCat(req.body->Describe(), " ended early"))
               : n.status();
    return CURL_READFUNC_ABORT;
  }
  ex->upload_pos += *n;
  return *n;
}

// libcurl rewinds the body when it must send it again on the same attempt.
int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* ex = static_cast<Exchange*>(user);
  if (origin != SEEK_SET || offset < 0 ||
      static_cast<uint64_t>(offset) > ex->request->body_length) {
    return CURL_SEEKFUNC_FAIL;
  }
  ex->upload_pos = static_cast<uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

long Millis(absl::Duration d) { return static_cast<long>(absl::ToInt64Milliseconds(d)); }

void SetBody(CURL* h, Exchange* ex) {
  curl_easy_setopt(h, CURLOPT_READFUNCTION, &OnRead);
  curl_easy_setopt(h, CURLOPT_READDATA, ex);
  curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, &OnSeek);
  curl_easy_setopt(h, CURLOPT_SEEKDATA, ex);
}

void SetMethod(CURL* h, const HttpRequest& req, Exchange* ex) {
  const auto length = static_cast<curl_off_t>(req.body == nullptr ? 0 : req.body_length);
  if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, length);
    SetBody(h, ex);
  } else if (req.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, length);
    if (length == 0) {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    } else {
      SetBody(h, ex);
    }
  } else if (req.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
}

}  // namespace

std::string HttpResponse::Header(const std::string& lowercase_name) const {
  auto it = headers.find(lowercase_name);
  return it == headers.end() ? "" : it->second;
}

void InitS3LibrariesOnce() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
      LogError("curl_global_init failed", {{"error", curl_easy_strerror(rc)}});
      std::abort();
    }
    xmlInitParser();
  });
}

HttpTransport::HttpTransport(TransportOptions options)
    : options_(std::move(options)), sigv4_(absl::StrCat("aws:amz:", options_.region, ":s3")) {
  for (const std::string& entry : options_.resolve) {
    resolve_ = curl_slist_append(resolve_, entry.c_str());
  }
}

HttpTransport::~HttpTransport() {
  absl::MutexLock lock(&mu_);
  for (CURL* h : idle_) curl_easy_cleanup(h);
  curl_slist_free_all(resolve_);
}

CURL* HttpTransport::Acquire() {
  CURL* h = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      h = idle_.back();
      idle_.pop_back();
    }
  }
  if (h == nullptr) h = curl_easy_init();
  if (h == nullptr) {
    LogError("curl_easy_init failed");
    std::abort();
  }
  // Clears every option; keeps the connection and DNS caches.
  curl_easy_reset(h);
  return h;
}

void HttpTransport::Release(CURL* h) {
  absl::MutexLock lock(&mu_);
  if (idle_.size() < kMaxIdleHandles) {
    idle_.push_back(h);
  } else {
    curl_easy_cleanup(h);
  }
}

HttpResponse HttpTransport::Perform(const HttpRequest& req, const S3Credentials& credentials) {
  HttpResponse response;
  Exchange ex{&req, &response};
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_slist* headers = curl_slist_append(
      nullptr, absl::StrCat("x-amz-content-sha256: ", req.payload_sha256).c_str());
  if (!credentials.session_token.empty()) {
    headers = curl_slist_append(
        headers, absl::StrCat("x-amz-security-token: ", credentials.session_token).c_str());
  }
  for (const std::string& h : req.headers) headers = curl_slist_append(headers, h.c_str());

  CURL* h = Acquire();
  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);  // keys may hold "." and ".." segments
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, Millis(options_.connect_timeout));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                   std::max<long>(1, static_cast<long>(absl::ToInt64Seconds(
                                         options_.idle_timeout + absl::Milliseconds(999)))));
  if (req.timeout > absl::ZeroDuration()) {
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, Millis(req.timeout));
  }
  if (!options_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (resolve_ != nullptr) curl_easy_setopt(h, CURLOPT_RESOLVE, resolve_);
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4_.c_str());
  curl_easy_setopt(h, CURLOPT_USERNAME, credentials.access_key_id.c_str());
  curl_easy_setopt(h, CURLOPT_PASSWORD, credentials.secret_access_key.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &ex);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnWrite);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &ex);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  SetMethod(h, req, &ex);

  response.curl_code = curl_easy_perform(h);
  if (response.curl_code != CURLE_OK) {
    response.curl_error = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(response.curl_code);
  }
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  Release(h);
  curl_slist_free_all(headers);
  return response;
}

}  // namespace gpuctl::s3
