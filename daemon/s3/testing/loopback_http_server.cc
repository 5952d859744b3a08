#include "daemon/s3/testing/loopback_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gpuctl::s3::testing {
namespace {

// How long one connection may take to deliver its request.
constexpr absl::Duration kIoDeadline = absl::Seconds(20);
constexpr size_t kMaxHead = size_t{64} << 10;
constexpr size_t kMaxBody = 256 << 20;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "LoopbackHttpServer: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

// Reads whatever arrives before `deadline` into `buf`; false on EOF, error
// or timeout.
bool ReadSome(int fd, std::string* buf, absl::Time deadline) {
  pollfd p{fd, POLLIN, 0};
  int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  if (ms <= 0 || ::poll(&p, 1, static_cast<int>(ms)) <= 0) return false;
  char chunk[64 * 1024];
  ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
  if (n <= 0) return false;
  buf->append(chunk, static_cast<size_t>(n));
  return true;
}

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away; the test will notice
    data.remove_prefix(static_cast<size_t>(n));
  }
}

bool ParseHead(absl::string_view head, RecordedRequest* req) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  if (lines.empty()) return false;
  req->request_line = std::string(lines[0]);
  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3) return false;
  req->method = std::string(parts[0]);
  absl::string_view target = parts[1];
  size_t q = target.find('?');
  req->path = std::string(target.substr(0, q));
  if (q != absl::string_view::npos) req->query = std::string(target.substr(q + 1));
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) return false;
    req->headers.emplace_back(absl::AsciiStrToLower(lines[i].substr(0, colon)),
                              absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  return true;
}

std::string Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

}  // namespace

std::string RecordedRequest::Header(absl::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

int RecordedRequest::HeaderCount(absl::string_view name) const {
  int count = 0;
  for (const auto& [k, v] : headers) count += k == name ? 1 : 0;
  return count;
}

CannedResponse S3ErrorResponse(int status, absl::string_view code, absl::string_view message) {
  CannedResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/xml");
  r.body = absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>", code,
                        "</Code><Message>", message,
                        "</Message><RequestId>tx-test-1</RequestId></Error>");
  return r;
}

LoopbackHttpServer::LoopbackHttpServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) Die("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if (::bind(listen_fd_, sa, sizeof(addr)) != 0) Die("bind");
  if (::listen(listen_fd_, 64) != 0) Die("listen");
  socklen_t len = sizeof(addr);
  if (::getsockname(listen_fd_, sa, &len) != 0) Die("getsockname");
  port_ = ntohs(addr.sin_port);
  if (::pipe2(stop_pipe_, O_CLOEXEC) != 0) Die("pipe2");
  thread_ = std::thread([this] { Loop(); });
}

LoopbackHttpServer::~LoopbackHttpServer() {
  char byte = 0;
  if (::write(stop_pipe_[1], &byte, 1) != 1) Die("write");
  thread_.join();
  ::close(listen_fd_);
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
}

std::string LoopbackHttpServer::endpoint() const {
  return absl::StrCat("http://127.0.0.1:", port_);
}

std::vector<RecordedRequest> LoopbackHttpServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

void LoopbackHttpServer::Loop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      Die("poll");
    }
    if (fds[1].revents != 0) return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Serve(fd);
    ::close(fd);
  }
}

void LoopbackHttpServer::Serve(int fd) {
  const absl::Time deadline = absl::Now() + kIoDeadline;
  std::string buf;
  size_t head_end;
  while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (buf.size() > kMaxHead || !ReadSome(fd, &buf, deadline)) return;
  }
  RecordedRequest req;
  if (!ParseHead(absl::string_view(buf).substr(0, head_end), &req)) return;
  buf.erase(0, head_end + 4);
  size_t length = 0;
  std::string cl = req.Header("content-length");
  if (!cl.empty() && (!absl::SimpleAtoi(cl, &length) || length > kMaxBody)) return;
  if (!req.Header("transfer-encoding").empty()) {
    WriteAll(fd, "HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    return;
  }
  if (absl::EqualsIgnoreCase(req.Header("expect"), "100-continue")) {
    WriteAll(fd, "HTTP/1.1 100 Continue\r\n\r\n");
  }
  while (buf.size() < length) {
    if (!ReadSome(fd, &buf, deadline)) return;
  }
  req.body = buf.substr(0, length);
  {
    absl::MutexLock lock(&mu_);
    requests_.push_back(req);
  }
  CannedResponse resp = handler_(req);
  if (resp.action == CannedResponse::Action::kDropConnection) return;
  std::string head = absl::StrCat("HTTP/1.1 ", resp.status, " ", Reason(resp.status), "\r\n");
  for (const auto& [name, value] : resp.headers) absl::StrAppend(&head, name, ": ", value, "\r\n");
  absl::StrAppend(&head, "Content-Length: ", resp.body.size(), "\r\nConnection: close\r\n\r\n");
  WriteAll(fd, head);
  if (req.method == "HEAD") return;
  if (resp.action == CannedResponse::Action::kTruncateBody) {
    WriteAll(fd, absl::string_view(resp.body).substr(0, resp.truncate_at));
    return;
  }
  WriteAll(fd, resp.body);
}

}  // namespace gpuctl::s3::testing
