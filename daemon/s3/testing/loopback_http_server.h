#ifndef GPUCTL_DAEMON_S3_TESTING_LOOPBACK_HTTP_SERVER_H_
#define GPUCTL_DAEMON_S3_TESTING_LOOPBACK_HTTP_SERVER_H_

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace gpuctl::s3::testing {

// A request as it arrived on the wire.
struct RecordedRequest {
  std::string request_line;  // "PUT /b/k?uploads= HTTP/1.1"
  std::string method;
  std::string path;   // raw, still percent-encoded
  std::string query;  // raw, after '?'
  // In arrival order, names lowercased, values trimmed.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The first value of header `name` (lowercase), or "".
  std::string Header(absl::string_view name) const;
  int HeaderCount(absl::string_view name) const;
};

struct CannedResponse {
  enum class Action {
    kRespond,
    // Close the connection without answering.
    kDropConnection,
    // Announce the whole body but send only `truncate_at` bytes, then close.
    kTruncateBody,
  };
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  Action action = Action::kRespond;
  size_t truncate_at = 0;
};

// An S3 <Error> answer.
CannedResponse S3ErrorResponse(int status, absl::string_view code, absl::string_view message);

// An HTTP/1.1 server on 127.0.0.1 (port 0) for client tests: records every
// request, answers "100 Continue" when asked, then answers with the
// handler's response and closes the connection. Connections are served one
// at a time on the server's own thread, which also runs the handler.
class LoopbackHttpServer {
 public:
  using Handler = std::function<CannedResponse(const RecordedRequest&)>;

  explicit LoopbackHttpServer(Handler handler);
  ~LoopbackHttpServer();
  LoopbackHttpServer(const LoopbackHttpServer&) = delete;
  LoopbackHttpServer& operator=(const LoopbackHttpServer&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:<port>".
  std::string endpoint() const;
  std::vector<RecordedRequest> requests() const;

 private:
  void Loop();
  void Serve(int fd);

  const Handler handler_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  int port_ = 0;
  mutable absl::Mutex mu_;
  std::vector<RecordedRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gpuctl::s3::testing

#endif  // GPUCTL_DAEMON_S3_TESTING_LOOPBACK_HTTP_SERVER_H_
