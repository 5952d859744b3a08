#include "daemon/config/daemon_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/config/testing/expect_options.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

using ::gpuctl::daemon::testing::ExpectSameOptions;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using KeyValues = std::vector<std::pair<std::string, std::string>>;

// Dotted keys and their values as nested YAML; keys of one section must be
// adjacent.
std::string NestedYaml(const KeyValues& entries) {
  std::string out;
  std::vector<std::string> open;
  for (const auto& [path, value] : entries) {
    std::vector<std::string> parts = absl::StrSplit(path, '.');
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) {
      ++common;
    }
    open.resize(common);
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      absl::StrAppend(&out, std::string(2 * i, ' '), parts[i], ":\n");
      open.push_back(parts[i]);
    }
    absl::StrAppend(&out, std::string(2 * (parts.size() - 1), ' '), parts.back(), ": ", value,
                    "\n");
  }
  return out;
}

absl::StatusOr<DaemonOptions> ParseOptions(const std::string& yaml) {
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where = ParseDaemonConfig(yaml, "gpuctl.yaml", &options);
  if (!where.ok()) return where.status();
  return options;
}

std::string ParseError(const std::string& yaml) {
  absl::StatusOr<DaemonOptions> options = ParseOptions(yaml);
  if (options.ok()) return "(accepted)";
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(options.status().message());
}

TEST(DaemonConfigTest, AnEmptyFileKeepsEveryValue) {
  DaemonOptions preset;
  preset.listen_address = "127.0.0.1:9";
  preset.socket_path = "/tmp/env.sock";
  for (const char* yaml : {"", "\n\n", "# nothing yet\n", "---\n", "---\n...\n", "~\n"}) {
    DaemonOptions options = preset;
    absl::StatusOr<ConfigLocations> where = ParseDaemonConfig(yaml, "gpuctl.yaml", &options);
    ASSERT_TRUE(where.ok()) << where.status();
    ExpectSameOptions(options, preset);
    EXPECT_EQ(where->Line("listen"), 0);
  }
}

struct KeyCase {
  std::string key;
  std::string value;
  std::function<void(DaemonOptions&)> expect;
};

// A value other than the default for every key, and what it sets.
std::vector<KeyCase> EveryKey() {
  return {
      {"listen", "\"[::1]:9000\"", [](DaemonOptions& o) { o.listen_address = "[::1]:9000"; }},
      {"listen_mode", "\"0660\"", [](DaemonOptions& o) { o.listen_mode = 0660; }},
      {"listen_group", "gpuctl", [](DaemonOptions& o) { o.listen_group = "gpuctl"; }},
      {"host_name", "gpu-node-7", [](DaemonOptions& o) { o.host_name = "gpu-node-7"; }},
      {"insecure", "true", [](DaemonOptions& o) { o.insecure = true; }},
      {"socket", "/tmp/g.sock", [](DaemonOptions& o) { o.socket_path = "/tmp/g.sock"; }},
      {"log_level", "warning", [](DaemonOptions& o) { o.log_level = LogLevel::kWarning; }},
      {"ready_file", "/tmp/ready", [](DaemonOptions& o) { o.ready_file = "/tmp/ready"; }},
      {"ipc.socket_mode", "\"0600\"", [](DaemonOptions& o) { o.socket_mode = 0600; }},
      {"ipc.socket_group", "render", [](DaemonOptions& o) { o.socket_group = "render"; }},
      {"ipc.allowed_uids", "[1000, alice]",
       [](DaemonOptions& o) {
         o.allowed_users = {"1000", "alice"};
       }},
      {"ipc.hello_rate", "0", [](DaemonOptions& o) { o.hello_rate = 0; }},
      {"ipc.hello_burst", "64", [](DaemonOptions& o) { o.hello_burst = 64; }},
      {"kineto.mode", "\"off\"",
       [](DaemonOptions& o) { o.kineto_server.mode = kineto::KinetoMode::kOff; }},
      {"kineto.dyno_rpc_listen", "\"[::1]:1778\"",
       [](DaemonOptions& o) { o.dyno_rpc_listen = "[::1]:1778"; }},
      {"kineto.socket_dir", "/run/k", [](DaemonOptions& o) { o.kineto_socket_dir = "/run/k"; }},
      {"kineto.max_processes", "10", [](DaemonOptions& o) { o.kineto.max_processes = 10; }},
      {"kineto.max_trace_bytes", "8MiB",
       [](DaemonOptions& o) { o.kineto.max_trace_bytes = uint64_t{8} << 20; }},
      {"kineto.max_total_bytes", "16MiB",
       [](DaemonOptions& o) { o.kineto.max_total_bytes = uint64_t{16} << 20; }},
      {"kineto.poll_period", "1s",
       [](DaemonOptions& o) { o.kineto.poll_period = absl::Seconds(1); }},
      {"kineto.warmup", "3s", [](DaemonOptions& o) { o.kineto.warmup_secs = 3; }},
      {"tls.cert", "/etc/gpuctl/s.pem", [](DaemonOptions& o) { o.tls_cert = "/etc/gpuctl/s.pem"; }},
      {"tls.key", "/etc/gpuctl/s.key", [](DaemonOptions& o) { o.tls_key = "/etc/gpuctl/s.key"; }},
      {"tls.client_ca", "/etc/gpuctl/ca.pem",
       [](DaemonOptions& o) { o.tls_client_ca = "/etc/gpuctl/ca.pem"; }},
      {"auth.token_file", "/etc/gpuctl/token",
       [](DaemonOptions& o) { o.auth_token_file = "/etc/gpuctl/token"; }},
      {"auth.tokens",
       "[{name: ml, token_file: /etc/gpuctl/ml.token, jobs: ['42', '43'], "
       "namespaces: [ml-train], labels: {team: vision}}, "
       "{name: ops, token_file: /etc/gpuctl/ops.token, namespaces: [ops]}]",
       [](DaemonOptions& o) {
         o.auth_tokens = {{.scope = {.name = "ml",
                                     .jobs = {"42", "43"},
                                     .namespaces = {"ml-train"},
                                     .labels = {{"team", "vision"}}},
                           .token_file = "/etc/gpuctl/ml.token"},
                          {.scope = {.name = "ops", .namespaces = {"ops"}},
                           .token_file = "/etc/gpuctl/ops.token"}};
       }},
      {"metrics.listen", "127.0.0.1:9464",
       [](DaemonOptions& o) { o.metrics.listen = "127.0.0.1:9464"; }},
      {"metrics.allow_insecure", "true", [](DaemonOptions& o) { o.metrics.allow_insecure = true; }},
      {"host_context.frequency_hz", "499",
       [](DaemonOptions& o) { o.host_context.sampler.frequency_hz = 499; }},
      {"host_context.max_samples", "5000",
       [](DaemonOptions& o) { o.host_context.sampler.max_samples = 5000; }},
      {"host_context.ring_pages", "64",
       [](DaemonOptions& o) { o.host_context.sampler.ring_pages = 64; }},
      {"trace.max_duration", "2h", [](DaemonOptions& o) { o.max_duration = absl::Hours(2); }},
      {"trace.start_delay", "0", [](DaemonOptions& o) { o.start_delay = absl::ZeroDuration(); }},
      {"trace.result_grace", "45s", [](DaemonOptions& o) { o.result_grace = absl::Seconds(45); }},
      {"trace.max_payload_bytes", "1GiB",
       [](DaemonOptions& o) { o.max_payload_bytes = uint64_t{1} << 30; }},
      {"trace.max_buffer_bytes", "64MB", [](DaemonOptions& o) { o.max_buffer_bytes = 64000000; }},
      {"trace.max_ingest_bytes", "2GiB",
       [](DaemonOptions& o) { o.max_ingest_bytes = uint64_t{2} << 30; }},
      {"store.path", "/data/traces", [](DaemonOptions& o) { o.store_dir = "/data/traces"; }},
      {"store.retention.max_bytes", "1073741824",
       [](DaemonOptions& o) { o.retention.max_bytes = uint64_t{1} << 30; }},
      {"store.retention.max_age", "7d",
       [](DaemonOptions& o) { o.retention.max_age = absl::Hours(24 * 7); }},
      {"store.retention.max_count", "0", [](DaemonOptions& o) { o.retention.max_count = 0; }},
      {"store.s3.endpoint", "https://s3.us-west-2.amazonaws.com",
       [](DaemonOptions& o) { o.s3->endpoint = "https://s3.us-west-2.amazonaws.com"; }},
      {"store.s3.region", "us-west-2", [](DaemonOptions& o) { o.s3->region = "us-west-2"; }},
      {"store.s3.bucket", "fleet.traces", [](DaemonOptions& o) { o.s3->bucket = "fleet.traces"; }},
      {"store.s3.prefix", "gpuctl/prod", [](DaemonOptions& o) { o.s3->prefix = "gpuctl/prod"; }},
      {"store.s3.path_style", "true", [](DaemonOptions& o) { o.s3->path_style = true; }},
      {"store.s3.access_key_id", "AKIDEXAMPLE",
       [](DaemonOptions& o) { o.s3->access_key_id = "AKIDEXAMPLE"; }},
      {"store.s3.secret_access_key", "c2VjcmV0",
       [](DaemonOptions& o) { o.s3->secret_access_key = "c2VjcmV0"; }},
      {"store.s3.session_token",
       "dG9rZW4=", [](DaemonOptions& o) { o.s3->session_token = "dG9rZW4="; }},
      {"store.s3.credentials_file", "/etc/gpuctl/s3-credentials",
       [](DaemonOptions& o) { o.s3->credentials_file = "/etc/gpuctl/s3-credentials"; }},
      {"store.s3.profile", "fleet", [](DaemonOptions& o) { o.s3->profile = "fleet"; }},
      {"store.s3.ca_file", "/etc/ssl/ca.pem",
       [](DaemonOptions& o) { o.s3->ca_file = "/etc/ssl/ca.pem"; }},
      {"store.s3.multipart_threshold", "64MiB",
       [](DaemonOptions& o) { o.s3->multipart_threshold = uint64_t{64} << 20; }},
      {"store.s3.part_size", "32MiB",
       [](DaemonOptions& o) { o.s3->part_size = uint64_t{32} << 20; }},
      {"store.s3.connect_timeout", "3s",
       [](DaemonOptions& o) { o.s3->connect_timeout = absl::Seconds(3); }},
      {"store.s3.request_timeout", "2m",
       [](DaemonOptions& o) { o.s3->request_timeout = absl::Minutes(2); }},
      {"store.s3.idle_timeout", "90s",
       [](DaemonOptions& o) { o.s3->idle_timeout = absl::Seconds(90); }},
      {"store.s3.max_attempts", "9", [](DaemonOptions& o) { o.s3->max_attempts = 9; }},
      {"store.s3.initial_backoff", "250ms",
       [](DaemonOptions& o) { o.s3->initial_backoff = absl::Milliseconds(250); }},
      {"store.s3.max_backoff", "1m",
       [](DaemonOptions& o) { o.s3->max_backoff = absl::Minutes(1); }},
      {"store.s3.upload_wait", "0",
       [](DaemonOptions& o) { o.s3_store.upload_wait = absl::ZeroDuration(); }},
      {"store.s3.keep_local", "true", [](DaemonOptions& o) { o.s3_store.keep_local = true; }},
      {"store.s3.upload_retry_max", "1h",
       [](DaemonOptions& o) { o.s3_store.upload_retry_max = absl::Hours(1); }},
      {"store.s3.shutdown_wait", "90s",
       [](DaemonOptions& o) { o.s3_store.shutdown_wait = absl::Seconds(90); }},
      {"schedule.seed", "fleet", [](DaemonOptions& o) { o.schedule.seed = "fleet"; }},
      {"schedule.max_duty_cycle", "0.5", [](DaemonOptions& o) { o.schedule.max_duty_cycle = 0.5; }},
      {"schedule.capture_time_per_day", "1h",
       [](DaemonOptions& o) { o.schedule.capture_time_per_day = absl::Hours(1); }},
      {"schedule.min_free_store_bytes", "1GiB",
       [](DaemonOptions& o) { o.schedule.min_free_store_bytes = uint64_t{1} << 30; }},
      {"schedule.worker_threads", "4", [](DaemonOptions& o) { o.schedule.worker_threads = 4; }},
      {"schedule.worker_nice", "idle", [](DaemonOptions& o) { o.schedule.worker_idle = true; }},
      {"schedule.rules",
       "[{name: r, selector: {job: \"42\"}, period: 1h, window: 1s, probability: 0.5}]",
       [](DaemonOptions& o) {
         scheduler::ScheduleRule rule;
         rule.name = "r";
         rule.selector.set_job_id("42");
         rule.period = absl::Hours(1);
         rule.window = absl::Seconds(1);
         rule.probability = 0.5;
         o.schedule.rules = {rule};
       }},
  };
}

// What store.s3 needs besides the key under test.
KeyValues S3Companions(const std::string& key) {
  KeyValues companions;
  auto add = [&](const char* name, const char* value) {
    if (key != absl::StrCat("store.s3.", name))
      companions.emplace_back(absl::StrCat("store.s3.", name), value);
  };
  add("endpoint", "http://rgw.example.com:7480");
  add("region", "us-east-1");
  add("bucket", "traces");
  if (key == "store.s3.access_key_id" || key == "store.s3.session_token") {
    add("secret_access_key", "c2VjcmV0");
  }
  if (key == "store.s3.secret_access_key" || key == "store.s3.session_token") {
    add("access_key_id", "AKIDEXAMPLE");
  }
  return companions;
}

void ExpectS3Companions(const std::string& key, DaemonOptions& o) {
  o.s3.emplace();
  o.s3->endpoint = "http://rgw.example.com:7480";
  o.s3->region = "us-east-1";
  o.s3->bucket = "traces";
  if (key == "store.s3.access_key_id" || key == "store.s3.session_token") {
    o.s3->secret_access_key = "c2VjcmV0";
  }
  if (key == "store.s3.secret_access_key" || key == "store.s3.session_token") {
    o.s3->access_key_id = "AKIDEXAMPLE";
  }
}

TEST(DaemonConfigTest, TheRoundTripCasesCoverEveryKey) {
  std::set<std::string> cased;
  for (const KeyCase& c : EveryKey()) EXPECT_TRUE(cased.insert(c.key).second) << c.key;
  std::vector<std::string> keys = DaemonConfigKeys();
  EXPECT_EQ(cased, std::set<std::string>(keys.begin(), keys.end()));
  EXPECT_EQ(keys.size(), cased.size()) << "a key is listed twice";
}

TEST(DaemonConfigTest, EveryKeySetsItsFieldAndNothingElse) {
  for (const KeyCase& c : EveryKey()) {
    SCOPED_TRACE(c.key);
    KeyValues entries;
    DaemonOptions expected;
    if (absl::StartsWith(c.key, "store.s3.")) {
      entries = S3Companions(c.key);
      ExpectS3Companions(c.key, expected);
    }
    if (c.key == "schedule.rules") {  // rules need a seed
      entries.emplace_back("schedule.seed", "s");
      expected.schedule.seed = "s";
    }
    entries.emplace_back(c.key, c.value);
    c.expect(expected);
    std::string yaml = NestedYaml(entries);
    DaemonOptions options;
    absl::StatusOr<ConfigLocations> where = ParseDaemonConfig(yaml, "gpuctl.yaml", &options);
    ASSERT_TRUE(where.ok()) << where.status() << "\n" << yaml;
    ExpectSameOptions(options, expected);
    // The key under test is the last line.
    EXPECT_EQ(where->Line(c.key), static_cast<int>(std::count(yaml.begin(), yaml.end(), '\n')))
        << yaml;
  }
}

TEST(DaemonConfigTest, EveryKeyAtOnce) {
  KeyValues entries;
  DaemonOptions expected;
  expected.s3.emplace();
  for (const KeyCase& c : EveryKey()) {
    entries.emplace_back(c.key, c.value);
    c.expect(expected);
  }
  absl::StatusOr<DaemonOptions> options = ParseOptions(NestedYaml(entries));
  ASSERT_TRUE(options.ok()) << options.status();
  ExpectSameOptions(*options, expected);
}

TEST(DaemonConfigTest, FlowStyleAndQuotedValuesRead) {
  absl::StatusOr<DaemonOptions> options = ParseOptions(
      "store: {path: '/srv/t', retention: {max_bytes: \"2GiB\", max_age: '12h', max_count: 5}}\n"
      "trace: {start_delay: \"0ms\"}\n"
      "ready_file: \"\"\n"
      "socket: !!str 1234\n");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->store_dir, "/srv/t");
  EXPECT_EQ(options->retention.max_bytes, uint64_t{2} << 30);
  EXPECT_EQ(options->retention.max_age, absl::Hours(12));
  EXPECT_EQ(options->retention.max_count, 5u);
  EXPECT_EQ(options->start_delay, absl::ZeroDuration());
  EXPECT_EQ(options->ready_file, "");
  EXPECT_EQ(options->socket_path, "1234");
}

TEST(DaemonConfigTest, SectionsWithEveryKeyCommentedOutAreEmpty) {
  absl::StatusOr<DaemonOptions> options =
      ParseOptions("trace:\n  # max_duration: 1h\nstore:\n  retention:\n");
  ASSERT_TRUE(options.ok()) << options.status();
  ExpectSameOptions(*options, DaemonOptions{});
}

TEST(DaemonConfigTest, ABadValueNamesTheFileTheLineAndTheKey) {
  std::string yaml =
      "# gpuctld\n"
      "listen: 127.0.0.1:7070\n"
      "\n"
      "trace:\n"
      "  max_duration: 10m\n"
      "  start_delay: 100ms\n"
      "\n"
      "store:\n"
      "  path: /var/lib/gpuctl/traces\n"
      "  retention:\n"
      "    max_bytes: 50GiB\n"
      "    max_age: 3x\n"
      "    max_count: 100000\n";
  EXPECT_EQ(ParseError(yaml),
            "gpuctl.yaml:12: store.retention.max_age: \"3x\" is not a duration "
            "(use 100ms, 10s, 10m, 2h, 30d)");
}

TEST(DaemonConfigTest, BadIpcValuesAreErrors) {
  EXPECT_EQ(ParseError("ipc:\n  socket_mode: \"0680\"\n"),
            "gpuctl.yaml:2: ipc.socket_mode: socket mode \"0680\" is not octal (write permission "
            "bits in octal, like \"0660\")");
  EXPECT_THAT(ParseError("ipc:\n  socket_mode: \"4660\"\n"), HasSubstr("setuid"));
  EXPECT_THAT(ParseError("ipc:\n  socket_group: \"a b\"\n"),
              HasSubstr("gpuctl.yaml:2: ipc.socket_group: socket group \"a b\" holds a blank"));
  EXPECT_THAT(ParseError("ipc:\n  allowed_uids: 1000\n"),
              HasSubstr("ipc.allowed_uids: expected a list of users"));
  EXPECT_THAT(ParseError("ipc:\n  allowed_uids: []\n"), HasSubstr("would refuse every process"));
  EXPECT_THAT(ParseError("ipc:\n  allowed_uids: [1000, [2]]\n"),
              HasSubstr("entry 2 must be a uid or a user name"));
  EXPECT_THAT(ParseError("ipc:\n  allowed_uids: [4294967295]\n"),
              HasSubstr("entry 1: uid 4294967295 is out of range"));
}

TEST(DaemonConfigTest, BadScopedTokensAreErrors) {
  EXPECT_THAT(ParseError("auth:\n  tokens: {name: x}\n"),
              HasSubstr("auth.tokens: expected a list of tokens"));
  EXPECT_THAT(ParseError("auth:\n  tokens: [x]\n"), HasSubstr("auth.tokens[0]: expected a token"));
  EXPECT_THAT(ParseError("auth:\n  tokens: [{name: x, jobs: ['1']}]\n"),
              HasSubstr("auth.tokens[0]: needs a token_file"));
  EXPECT_THAT(ParseError("auth:\n  tokens: [{name: x, token_file: /t}]\n"),
              HasSubstr("has no jobs, namespaces or labels"));
  EXPECT_THAT(ParseError("auth:\n  tokens: [{name: 'a b', token_file: /t, jobs: ['1']}]\n"),
              HasSubstr("token name"));
  EXPECT_THAT(ParseError("auth:\n  tokens: [{name: x, token_file: /t, jobs: ['1'], extra: 1}]\n"),
              HasSubstr("extra"));
  EXPECT_THAT(ParseError("auth:\n  tokens: [{name: x, token_file: /t, jobs: ['1']}, "
                         "{name: x, token_file: /u, jobs: ['2']}]\n"),
              HasSubstr("given to another token too"));
  EXPECT_THAT(ParseError("auth:\n  tokens: [{name: x, token_file: /t, labels: {'bad key': v}}]\n"),
              HasSubstr("label"));
}

TEST(DaemonConfigTest, BadKinetoValuesAreErrors) {
  EXPECT_EQ(ParseError("kineto:\n  mode: maybe\n"),
            "gpuctl.yaml:2: kineto.mode: kineto.mode must be auto, on or off, not \"maybe\"");
  EXPECT_THAT(ParseError("kineto:\n  socket_dir: relative\n"),
              HasSubstr("kineto.socket_dir: must be an absolute directory"));
  EXPECT_THAT(ParseError(absl::StrCat("kineto:\n  socket_dir: /", std::string(60, 'd'), "\n")),
              HasSubstr("at most 53 bytes"));
  EXPECT_THAT(ParseError("kineto:\n  max_processes: 0\n"), HasSubstr("out of range"));
  EXPECT_THAT(ParseError("kineto:\n  max_trace_bytes: 1KiB\n"), HasSubstr("1MiB to 64GiB"));
  EXPECT_THAT(ParseError("kineto:\n  poll_period: 10ms\n"), HasSubstr("100ms to 10m"));
  EXPECT_THAT(ParseError("kineto:\n  warmup: 1500ms\n"), HasSubstr("whole seconds"));
  EXPECT_THAT(ParseError("kineto:\n  port: 1778\n"), HasSubstr("kineto.port"));
  // "" turns the path socket off.
  absl::StatusOr<DaemonOptions> none = ParseOptions("kineto:\n  socket_dir: \"\"\n");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->kineto_socket_dir, "");
}

TEST(DaemonConfigTest, BadHostContextValuesAreErrors) {
  EXPECT_THAT(ParseError("host_context:\n  frequency_hz: 0\n"), HasSubstr("out of range"));
  EXPECT_THAT(ParseError("host_context:\n  frequency_hz: 1001\n"), HasSubstr("out of range"));
  EXPECT_THAT(ParseError("host_context:\n  max_samples: 999\n"), HasSubstr("out of range"));
  EXPECT_THAT(ParseError("host_context:\n  ring_pages: 24\n"),
              HasSubstr("host_context.ring_pages: 24 is not a power of two"));
  EXPECT_THAT(ParseError("host_context:\n  ring_pages: 0\n"), HasSubstr("out of range"));
  EXPECT_THAT(ParseError("host_context:\n  ring_pages: 8192\n"), HasSubstr("out of range"));
  EXPECT_THAT(ParseError("host_context:\n  ring_pages: many\n"),
              HasSubstr("host_context.ring_pages"));
}

TEST(DaemonConfigTest, AStartDelayAboveAnHourIsAnError) {
  EXPECT_EQ(ParseError("trace:\n  start_delay: 2h\n"),
            "gpuctl.yaml:2: trace.start_delay: 2h is more than 1h");
  EXPECT_TRUE(ParseOptions("trace:\n  start_delay: 1h\n").ok());
}

TEST(DaemonConfigTest, BadHostNamesAreErrors) {
  EXPECT_EQ(ParseError("host_name: \"\"\n"),
            "gpuctl.yaml:1: host_name: a host name must not be empty");
  EXPECT_EQ(ParseError("listen: 127.0.0.1:0\nhost_name: \"gpu node\"\n"),
            "gpuctl.yaml:2: host_name: \"gpu node\" holds \" \": a host name is letters, digits, "
            "'.', '-' and '_'");
  EXPECT_THAT(ParseError("host_name: [a]\n"), HasSubstr("gpuctl.yaml:1: host_name:"));
}

TEST(DaemonConfigTest, DynoRpcServesOnLoopbackOnly) {
  EXPECT_THAT(ParseError("kineto:\n  dyno_rpc_listen: 0.0.0.0:1778\n"),
              StartsWith("gpuctl.yaml:2: kineto.dyno_rpc_listen: \"0.0.0.0:1778\" is not a "
                         "loopback address"));
  EXPECT_THAT(ParseError("kineto:\n  dyno_rpc_listen: 127.0.0.1\n"), HasSubstr("is not HOST:PORT"));
  EXPECT_THAT(ParseError("kineto:\n  dyno_rpc_listen: [1778]\n"),
              StartsWith("gpuctl.yaml:2: kineto.dyno_rpc_listen: "));
  absl::StatusOr<DaemonOptions> options = ParseOptions("kineto:\n  dyno_rpc_listen: localhost:0\n");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->dyno_rpc_listen, "localhost:0");
  EXPECT_EQ(DaemonOptions{}.dyno_rpc_listen, "");  // off by default
}

TEST(DaemonConfigTest, BadHelloRateValuesAreErrors) {
  EXPECT_EQ(ParseError("ipc:\n  socket_mode: \"0660\"\n  hello_rate: 2000000\n"),
            "gpuctl.yaml:3: ipc.hello_rate: 2000000 is out of range (0 to 1000000)");
  EXPECT_EQ(ParseError("ipc:\n  hello_burst: 0\n"),
            "gpuctl.yaml:2: ipc.hello_burst: 0 is out of range (1 to 1000000)");
  EXPECT_THAT(ParseError("ipc:\n  hello_rate: 1.5\n"),
              StartsWith("gpuctl.yaml:2: ipc.hello_rate: "));
  EXPECT_THAT(ParseError("ipc:\n  hello_rate: -1\n"),
              StartsWith("gpuctl.yaml:2: ipc.hello_rate: "));
  EXPECT_THAT(ParseError("ipc:\n  hello_burst: [1]\n"),
              StartsWith("gpuctl.yaml:2: ipc.hello_burst: expected a whole number"));
  absl::StatusOr<DaemonOptions> options =
      ParseOptions("ipc:\n  hello_rate: 50\n  hello_burst: 500\n");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->hello_rate, 50u);
  EXPECT_EQ(options->hello_burst, 500u);
}

TEST(DaemonConfigTest, UnknownKeysAreErrors) {
  EXPECT_EQ(ParseError("listen: 127.0.0.1:7070\nlisten_address: x\n"),
            "gpuctl.yaml:2: listen_address: unknown key (the file takes listen, listen_mode, "
            "listen_group, host_name, "
            "insecure, socket, log_level, ready_file, ipc, kineto, tls, auth, metrics, "
            "host_context, trace, "
            "store, schedule)");
  EXPECT_EQ(ParseError("store:\n  retention:\n    max_size: 1GiB\n"),
            "gpuctl.yaml:3: store.retention.max_size: unknown key (store.retention takes "
            "max_bytes, max_age, max_count)");
  EXPECT_THAT(ParseError("store:\n  s3:\n    endpoint: http://h\n    secret: x\n"),
              StartsWith("gpuctl.yaml:4: store.s3.secret: unknown key (store.s3 takes endpoint,"));
  // Case matters, and so does the spelling of sections.
  EXPECT_THAT(ParseError("Listen: x\n"), StartsWith("gpuctl.yaml:1: Listen: unknown key"));
  EXPECT_THAT(ParseError("traces:\n  max_duration: 1m\n"),
              StartsWith("gpuctl.yaml:1: traces: unknown key"));
  EXPECT_THAT(ParseError("\"a\\tb\": 1\n"), StartsWith("gpuctl.yaml:1: a\\tb: unknown key"));
}

TEST(DaemonConfigTest, DuplicateKeysAreErrors) {
  EXPECT_EQ(ParseError("socket: /a\nlog_level: info\nsocket: /b\n"),
            "gpuctl.yaml:3: socket: set twice (first on line 1)");
  EXPECT_EQ(ParseError("store:\n  retention:\n    max_count: 1\n    max_count: 2\n"),
            "gpuctl.yaml:4: store.retention.max_count: set twice (first on line 3)");
  EXPECT_EQ(ParseError("store:\n  path: /a\ntrace: {}\nstore:\n  path: /b\n"),
            "gpuctl.yaml:4: store: set twice (first on line 1)");
  EXPECT_EQ(ParseError("trace: {max_duration: 1m, max_duration: 2m}\n"),
            "gpuctl.yaml:1: trace.max_duration: set twice (first on line 1)");
}

TEST(DaemonConfigTest, WrongTypesAreErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"listen: [a, b]\n", "gpuctl.yaml:1: listen: expected a string, found a list"},
      {"socket: {a: 1}\n", "gpuctl.yaml:1: socket: expected a string, found a mapping"},
      {"socket: true\n",
       "gpuctl.yaml:1: socket: expected a string, found the boolean true (quote it to mean the "
       "text)"},
      {"ready_file:\n", "gpuctl.yaml:1: ready_file: has no value (write \"\" for an empty string)"},
      {"insecure: yes\n", "gpuctl.yaml:1: insecure: expected true or false, found \"yes\""},
      {"insecure: \"true\"\n", "gpuctl.yaml:1: insecure: expected true or false, found \"true\""},
      {"insecure: 1\n", "gpuctl.yaml:1: insecure: expected true or false, found \"1\""},
      {"insecure:\n", "gpuctl.yaml:1: insecure: expected true or false, found no value"},
      {"trace: 5\n",
       "gpuctl.yaml:1: trace: expected a section (keys max_duration, start_delay, result_grace, "
       "max_payload_bytes, max_buffer_bytes, max_ingest_bytes), found a scalar"},
      {"store:\n  retention: [1]\n",
       "gpuctl.yaml:2: store.retention: expected a section (keys max_bytes, max_age, max_count), "
       "found a list"},
      {"trace:\n  max_duration: 600\n",
       "gpuctl.yaml:2: trace.max_duration: \"600\" is not a duration (use 100ms, 10s, 10m, 2h, "
       "30d)"},
      {"trace:\n  max_duration: [1m]\n",
       "gpuctl.yaml:2: trace.max_duration: expected a duration (100ms, 10s, 10m, 2h, 30d), found "
       "a list"},
      {"store:\n  retention:\n    max_count: many\n",
       "gpuctl.yaml:3: store.retention.max_count: \"many\" is not a whole number"},
      {"store:\n  retention:\n    max_bytes: 1.5GiB\n",
       "gpuctl.yaml:3: store.retention.max_bytes: \"1.5GiB\" is not a size (use bytes, or a "
       "whole number with KiB, MiB, GiB, TiB, or KB, MB, GB, TB: 256MiB, 50GiB)"},
      {"log_level: loud\n",
       "gpuctl.yaml:1: log_level: \"loud\" is not a log level (debug, info, warning, error)"},
      {"listen: \"\"\n", "gpuctl.yaml:1: listen: must not be empty"},
      {"store:\n  path: ''\n", "gpuctl.yaml:2: store.path: must not be empty"},
      {"socket: \"/run/a\\nb\"\n",
       "gpuctl.yaml:1: socket: \"/run/a\\nb\" contains a control character"},
      {"socket: !!int 5\n",
       "gpuctl.yaml:1: socket: unsupported tag \"tag:yaml.org,2002:int\"; expected a string"},
      {"? [a]\n: 1\n", "gpuctl.yaml:1: top level: a key must be a name, found a list"},
      {"store:\n  ? {a: 1}\n  : 1\n",
       "gpuctl.yaml:2: store: a key must be a name, found a mapping"},
  };
  for (const auto& [yaml, expected] : cases) EXPECT_EQ(ParseError(yaml), expected) << yaml;
}

TEST(DaemonConfigTest, NegativeAndOutOfRangeValuesAreErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"store:\n  retention:\n    max_bytes: -1\n",
       "gpuctl.yaml:3: store.retention.max_bytes: \"-1\" is negative; a size is 0 or more bytes"},
      {"store:\n  retention:\n    max_count: -3\n",
       "gpuctl.yaml:3: store.retention.max_count: \"-3\" is negative; expected 0 or more"},
      {"store:\n  retention:\n    max_age: -1d\n",
       "gpuctl.yaml:3: store.retention.max_age: \"-1d\" is negative; a duration is 0 or more "
       "(use 100ms, 10s, 10m, 2h, 30d)"},
      {"store:\n  retention:\n    max_age: 36501d\n",
       "gpuctl.yaml:3: store.retention.max_age: \"36501d\" is too long (at most 36500d)"},
      {"store:\n  retention:\n    max_bytes: 99999999999TiB\n",
       "gpuctl.yaml:3: store.retention.max_bytes: \"99999999999TiB\" is too large for a size"},
      {"trace:\n  max_duration: 0s\n",
       "gpuctl.yaml:2: trace.max_duration: \"0s\" must be more than 0"},
      {"trace:\n  result_grace: 0\n",
       "gpuctl.yaml:2: trace.result_grace: \"0\" must be more than 0"},
      {"trace:\n  max_payload_bytes: 1KiB\n",
       "gpuctl.yaml:2: trace.max_payload_bytes: 1KiB is out of range (1MiB to 64GiB)"},
      {"trace:\n  max_ingest_bytes: 1KiB\n",
       "gpuctl.yaml:2: trace.max_ingest_bytes: 1KiB is out of range (0 for no cap, or 1MiB to "
       "1TiB)"},
      {"trace:\n  max_buffer_bytes: 65GiB\n",
       "gpuctl.yaml:2: trace.max_buffer_bytes: 65GiB is out of range (1MiB to 64GiB)"},
      {"trace:\n  max_buffer_bytes: 512MiB\n",
       "gpuctl.yaml:2: trace.max_buffer_bytes: max_buffer_bytes (512MiB) is above "
       "max_payload_bytes (256MiB): a process's buffer must fit in one payload"},
      {"trace:\n  max_payload_bytes: 64MiB\n",
       "gpuctl.yaml:2: trace.max_payload_bytes: max_buffer_bytes (128MiB) is above "
       "max_payload_bytes (64MiB): a process's buffer must fit in one payload"},
  };
  for (const auto& [yaml, expected] : cases) EXPECT_EQ(ParseError(yaml), expected) << yaml;
}

TEST(DaemonConfigTest, AFileThatIsNotOneMappingIsAnError) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"- listen\n- socket\n",
       "gpuctl.yaml:1: expected a mapping of keys (listen, listen_mode, listen_group, host_name, "
       "insecure, socket, log_level, "
       "ready_file, ipc, kineto, tls, auth, metrics, host_context, trace, store, schedule), found "
       "a list"},
      {"\n\nhello\n",
       "gpuctl.yaml:3: expected a mapping of keys (listen, listen_mode, listen_group, host_name, "
       "insecure, socket, "
       "log_level, ready_file, ipc, kineto, tls, auth, metrics, host_context, trace, store, "
       "schedule), found a scalar"},
      {"listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n",
       "gpuctl.yaml:2: a second YAML document; the configuration is a single one"},
      {",\n", "gpuctl.yaml:1:1: invalid YAML: unexpected \",\""},
      {"# gpuctld\n\n  ,\n", "gpuctl.yaml:3:3: invalid YAML: unexpected \",\""},
      {"listen: 127.0.0.1:1\n---\n,\n",
       "gpuctl.yaml:2: a second YAML document; the configuration is a single one"},
      {"[:\n", "gpuctl.yaml:2:1: invalid YAML: end of sequence flow not found"},
      {"store:\n  retention: [1\n",
       "gpuctl.yaml:3:1: invalid YAML: end of sequence flow not found"},
      {"listen: a\n  socket: b\n", "gpuctl.yaml:2:9: invalid YAML: illegal map value"},
      {"a: *nowhere\n", "gpuctl.yaml:1:4: invalid YAML: the referenced anchor is not defined"},
  };
  for (const auto& [yaml, expected] : cases) EXPECT_EQ(ParseError(yaml), expected) << yaml;
  EXPECT_THAT(ParseError(std::string(5000, '[')), HasSubstr(": nested too deeply"));
  EXPECT_EQ(ParseError(std::string(kMaxConfigFileBytes + 1, '#')),
            "gpuctl.yaml: larger than 1MiB; not a gpuctld configuration");
}

TEST(DaemonConfigTest, AnErrorLeavesTheOptionsUntouched) {
  DaemonOptions options;
  options.store_dir = "/before";
  absl::StatusOr<ConfigLocations> where =
      ParseDaemonConfig("store:\n  path: /after\nlog_level: loud\n", "gpuctl.yaml", &options);
  ASSERT_FALSE(where.ok());
  EXPECT_EQ(options.store_dir, "/before");
  EXPECT_FALSE(options.s3.has_value());
  where = ParseDaemonConfig("store:\n  s3:\n    bucket: x\n", "gpuctl.yaml", &options);
  ASSERT_FALSE(where.ok());
  EXPECT_FALSE(options.s3.has_value());
}

TEST(DaemonConfigTest, LocationsRecordKeysAndSections) {
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where = ParseDaemonConfig(
      "listen: 127.0.0.1:1\nstore:\n  retention:\n    max_age: 1d\n", "/etc/g.yaml", &options);
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->file(), "/etc/g.yaml");
  EXPECT_EQ(where->Line("listen"), 1);
  EXPECT_EQ(where->Line("store"), 2);
  EXPECT_EQ(where->Line("store.retention"), 3);
  EXPECT_EQ(where->Line("store.retention.max_age"), 4);
  EXPECT_EQ(where->Line("socket"), 0);
  EXPECT_EQ(where->Error("listen", "bad").message(), "/etc/g.yaml:1: listen: bad");
}

TEST(DaemonConfigTest, KeysAreTheDocumentedSchema) {
  EXPECT_THAT(
      DaemonConfigKeys(),
      ::testing::ElementsAre(
          "listen", "listen_mode", "listen_group", "host_name", "insecure", "socket", "log_level",
          "ready_file", "ipc.socket_mode", "ipc.socket_group", "ipc.allowed_uids", "ipc.hello_rate",
          "ipc.hello_burst", "kineto.mode", "kineto.dyno_rpc_listen", "kineto.socket_dir",
          "kineto.max_processes", "kineto.max_trace_bytes", "kineto.max_total_bytes",
          "kineto.poll_period", "kineto.warmup", "tls.cert", "tls.key", "tls.client_ca",
          "auth.token_file", "auth.tokens", "metrics.listen", "metrics.allow_insecure",
          "host_context.frequency_hz", "host_context.max_samples", "host_context.ring_pages",
          "trace.max_duration", "trace.start_delay", "trace.result_grace",
          "trace.max_payload_bytes", "trace.max_buffer_bytes", "trace.max_ingest_bytes",
          "store.path", "store.retention.max_bytes", "store.retention.max_age",
          "store.retention.max_count", "store.s3.endpoint", "store.s3.region", "store.s3.bucket",
          "store.s3.prefix", "store.s3.path_style", "store.s3.access_key_id",
          "store.s3.secret_access_key", "store.s3.session_token", "store.s3.credentials_file",
          "store.s3.profile", "store.s3.ca_file", "store.s3.multipart_threshold",
          "store.s3.part_size", "store.s3.connect_timeout", "store.s3.request_timeout",
          "store.s3.idle_timeout", "store.s3.max_attempts", "store.s3.initial_backoff",
          "store.s3.max_backoff", "store.s3.upload_wait", "store.s3.keep_local",
          "store.s3.upload_retry_max", "store.s3.shutdown_wait", "schedule.seed",
          "schedule.max_duty_cycle", "schedule.capture_time_per_day",
          "schedule.min_free_store_bytes", "schedule.rules", "schedule.worker_threads",
          "schedule.worker_nice"));
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuctl-config-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(ConfigFileTest, ReadsAFile) {
  std::string path = Write("gpuctl.yaml", "store:\n  path: /srv/traces\n");
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where = LoadDaemonConfigFile(path, &options);
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(options.store_dir, "/srv/traces");
  EXPECT_EQ(where->file(), path);
  std::string empty = Write("empty.yaml", "");
  ASSERT_TRUE(LoadDaemonConfigFile(empty, &options).ok());
}

TEST_F(ConfigFileTest, ErrorsNameThePathAsGiven) {
  std::string path = Write("gpuctl.yaml", "\nstore:\n  path: 5s\n  bogus: 1\n");
  DaemonOptions options;
  absl::StatusOr<ConfigLocations> where = LoadDaemonConfigFile(path, &options);
  ASSERT_FALSE(where.ok());
  EXPECT_EQ(where.status().message(),
            absl::StrCat(path, ":4: store.bogus: unknown key (store takes path, retention, s3)"));
}

TEST_F(ConfigFileTest, AFileThatCannotBeReadIsAnError) {
  DaemonOptions options;
  std::string missing = dir_ + "/missing.yaml";
  EXPECT_EQ(LoadDaemonConfigFile(missing, &options).status().message(),
            absl::StrCat("cannot read config file ", missing, ": No such file or directory"));
  EXPECT_EQ(LoadDaemonConfigFile(dir_, &options).status().message(),
            absl::StrCat("cannot read config file ", dir_, ": is a directory"));
  std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(LoadDaemonConfigFile(fifo, &options).status().message(),
            absl::StrCat("cannot read config file ", fifo, ": not a regular file"));
  std::string big = Write("big.yaml", std::string(kMaxConfigFileBytes + 10, '#'));
  EXPECT_THAT(std::string(LoadDaemonConfigFile(big, &options).status().message()),
              HasSubstr("larger than 1MiB"));
  if (geteuid() != 0) {
    std::string locked = Write("locked.yaml", "listen: 127.0.0.1:1\n");
    ASSERT_EQ(chmod(locked.c_str(), 0), 0);
    EXPECT_EQ(LoadDaemonConfigFile(locked, &options).status().message(),
              absl::StrCat("cannot read config file ", locked, ": Permission denied"));
  }
}

}  // namespace
}  // namespace gpuctl::daemon
