// The store.s3 section: every field of s3::S3Config, each checked by the
// S3 client's own validation.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/config/config_schema.h"
#include "daemon/config/daemon_config.h"
#include "daemon/s3/credentials.h"
#include "daemon/s3/s3_config.h"

namespace gpuctl::daemon {
namespace {

// A configuration ValidateS3Config accepts, to check one field at a time
// against: its message then concerns that field.
s3::S3Config AcceptedProbe() {
  s3::S3Config probe;
  probe.endpoint = "http://s3.example.com";
  probe.region = "us-east-1";
  probe.bucket = "example-bucket";
  probe.path_style = true;
  return probe;
}

// Stores the value read from `v` through `set`, after ValidateS3Config has
// accepted it in the probe.
template <typename T>
absl::Status ReadChecked(const ConfigValue& v, absl::StatusOr<T> value,
                         void (*set)(s3::S3Config*, T), DaemonOptions* o) {
  if (!value.ok()) return value.status();
  s3::S3Config probe = AcceptedProbe();
  set(&probe, *value);
  if (absl::Status s = s3::ValidateS3Config(probe); !s.ok()) return v.Error(s.message());
  set(&*o->s3, *std::move(value));
  return absl::OkStatus();
}

// Leaves that ValidateS3Config does not check on their own.
template <typename T>
absl::Status ReadPlain(absl::StatusOr<T> value, void (*set)(s3::S3Config*, T), DaemonOptions* o) {
  if (!value.ok()) return value.status();
  set(&*o->s3, *std::move(value));
  return absl::OkStatus();
}

using Config = s3::S3Config;
using Dur = absl::Duration;
using Str = std::string;

absl::Status ReadTimeout(const ConfigValue& v, void (*set)(Config*, Dur), DaemonOptions* o) {
  return ReadChecked<Dur>(v, v.Duration(ZeroDuration::kRefused), set, o);
}

// The retry interval starts at S3StoreOptions::upload_retry_initial (1s).
constexpr absl::Duration kMaxUploadRetryMax = absl::Hours(24);
constexpr absl::Duration kMaxUploadWait = absl::Hours(1);
// Far beyond any sensible terminationGracePeriodSeconds.
constexpr absl::Duration kMaxShutdownWait = absl::Hours(1);

constexpr ConfigKey kS3Keys[] = {
    {.name = "endpoint",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadChecked<Str>(
               v, v.String(), [](Config* c, Str s) { c->endpoint = std::move(s); }, o);
         }},
    {.name = "region",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadChecked<Str>(
               v, v.String(), [](Config* c, Str s) { c->region = std::move(s); }, o);
         }},
    {.name = "bucket",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadChecked<Str>(
               v, v.String(), [](Config* c, Str s) { c->bucket = std::move(s); }, o);
         }},
    {.name = "prefix",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadChecked<Str>(
               v, v.String(), [](Config* c, Str s) { c->prefix = std::move(s); }, o);
         }},
    {.name = "path_style",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadPlain<bool>(
               v.Bool(), [](Config* c, bool b) { c->path_style = b; }, o);
         }},
    {.name = "access_key_id",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadPlain<Str>(
               v.String(), [](Config* c, Str s) { c->access_key_id = std::move(s); }, o);
         },
     .secret = true},
    {.name = "secret_access_key",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadPlain<Str>(
               v.String(), [](Config* c, Str s) { c->secret_access_key = std::move(s); }, o);
         },
     .secret = true},
    {.name = "session_token",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadPlain<Str>(
               v.String(), [](Config* c, Str s) { c->session_token = std::move(s); }, o);
         },
     .secret = true},
    {.name = "credentials_file",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadPlain<Str>(
               v.String(), [](Config* c, Str s) { c->credentials_file = std::move(s); }, o);
         }},
    {.name = "profile",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<Str> s = v.String();
           if (s.ok() && s->empty()) return v.Error("must not be empty");
           return ReadPlain<Str>(
               std::move(s), [](Config* c, Str p) { c->profile = std::move(p); }, o);
         }},
    {.name = "ca_file",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadPlain<Str>(
               v.String(), [](Config* c, Str s) { c->ca_file = std::move(s); }, o);
         }},
    {.name = "multipart_threshold",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadChecked<uint64_t>(
               v, v.Size(), [](Config* c, uint64_t n) { c->multipart_threshold = n; }, o);
         }},
    {.name = "part_size",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadChecked<uint64_t>(
               v, v.Size(), [](Config* c, uint64_t n) { c->part_size = n; }, o);
         }},
    {.name = "connect_timeout",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadTimeout(
               v, [](Config* c, Dur d) { c->connect_timeout = d; }, o);
         }},
    {.name = "request_timeout",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadTimeout(
               v, [](Config* c, Dur d) { c->request_timeout = d; }, o);
         }},
    {.name = "idle_timeout",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadTimeout(
               v, [](Config* c, Dur d) { c->idle_timeout = d; }, o);
         }},
    {.name = "max_attempts",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           // ValidateS3Config sets the range; Count only keeps the int in bounds.
           absl::StatusOr<uint64_t> n = v.Count(0, 1 << 20);
           if (!n.ok()) return n.status();
           return ReadChecked<int>(
               v, static_cast<int>(*n), [](Config* c, int a) { c->max_attempts = a; }, o);
         }},
    {.name = "initial_backoff",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadTimeout(
               v, [](Config* c, Dur d) { c->initial_backoff = d; }, o);
         }},
    {.name = "max_backoff",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           return ReadTimeout(
               v, [](Config* c, Dur d) { c->max_backoff = d; }, o);
         }},
    // How traces move to the bucket (s3::S3StoreOptions), not the client.
    {.name = "upload_wait",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<Dur> d = v.Duration(ZeroDuration::kAllowed);
           if (!d.ok()) return d.status();
           if (*d > kMaxUploadWait) {
             return v.Error(absl::StrCat("at most ", absl::FormatDuration(kMaxUploadWait),
                                         " (0 completes traces without waiting)"));
           }
           o->s3_store.upload_wait = *d;
           return absl::OkStatus();
         }},
    {.name = "keep_local",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<bool> b = v.Bool();
           if (!b.ok()) return b.status();
           o->s3_store.keep_local = *b;
           return absl::OkStatus();
         }},
    {.name = "upload_retry_max",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<Dur> d = v.Duration(ZeroDuration::kRefused);
           if (!d.ok()) return d.status();
           const Dur min = o->s3_store.upload_retry_initial;
           if (*d < min || *d > kMaxUploadRetryMax) {
             return v.Error(absl::StrCat("must be within [", absl::FormatDuration(min), ", ",
                                         absl::FormatDuration(kMaxUploadRetryMax), "]"));
           }
           o->s3_store.upload_retry_max = *d;
           return absl::OkStatus();
         }},
    {.name = "shutdown_wait",
     .read =
         [](const ConfigValue& v, DaemonOptions* o) {
           absl::StatusOr<Dur> d = v.Duration(ZeroDuration::kAllowed);
           if (!d.ok()) return d.status();
           if (*d > kMaxShutdownWait) {
             return v.Error(absl::StrCat("at most ", absl::FormatDuration(kMaxShutdownWait),
                                         " (0 leaves pending uploads for the next start)"));
           }
           o->s3_store.shutdown_wait = *d;
           return absl::OkStatus();
         }},
};

absl::Status CheckCredentials(const ConfigLocations& where, const s3::S3Config& c) {
  bool has_id = !c.access_key_id.empty();
  bool has_secret = !c.secret_access_key.empty();
  if (has_id != has_secret) {
    return where.Error(has_id ? "store.s3.access_key_id" : "store.s3.secret_access_key",
                       "access_key_id and secret_access_key go together; set both or neither");
  }
  if (!has_id) {
    if (!c.session_token.empty()) {
      return where.Error("store.s3.session_token",
                         "needs access_key_id and secret_access_key beside it");
    }
    return absl::OkStatus();
  }
  absl::Status s = s3::ValidateCredentials(
      s3::S3Credentials{c.access_key_id, c.secret_access_key, c.session_token}, "the file");
  return s.ok() ? s : where.Error("store.s3.access_key_id", s.message());
}

}  // namespace

absl::Span<const ConfigKey> S3ConfigKeys() { return kS3Keys; }

void OpenS3Section(DaemonOptions* options) { options->s3.emplace(); }

absl::Status CheckS3Section(const ConfigLocations& where, DaemonOptions* options) {
  const s3::S3Config& c = *options->s3;
  std::vector<std::string> missing;
  if (c.endpoint.empty()) missing.push_back("endpoint");
  if (c.region.empty()) missing.push_back("region");
  if (c.bucket.empty()) missing.push_back("bucket");
  if (!missing.empty()) {
    return where.Error("store.s3", absl::StrCat("missing ", absl::StrJoin(missing, ", "),
                                                " (required to store traces in S3)"));
  }
  if (absl::Status s = CheckCredentials(where, c); !s.ok()) return s;
  // What is left are rules across fields (an IP endpoint needs path style).
  if (absl::Status s = s3::ValidateS3Config(c); !s.ok()) {
    return where.Error(
        where.Line("store.s3.path_style") != 0 ? "store.s3.path_style" : "store.s3.endpoint",
        s.message());
  }
  return absl::OkStatus();
}

}  // namespace gpuctl::daemon
