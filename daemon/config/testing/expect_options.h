#ifndef GPUCTL_DAEMON_CONFIG_TESTING_EXPECT_OPTIONS_H_
#define GPUCTL_DAEMON_CONFIG_TESTING_EXPECT_OPTIONS_H_

#include "daemon/config/daemon_options.h"
#include "gtest/gtest.h"

namespace gpuctl::daemon::testing {

// Every field of two S3 configurations, one expectation each.
inline void ExpectSameS3Config(const s3::S3Config& a, const s3::S3Config& b) {
  EXPECT_EQ(a.endpoint, b.endpoint);
  EXPECT_EQ(a.region, b.region);
  EXPECT_EQ(a.bucket, b.bucket);
  EXPECT_EQ(a.prefix, b.prefix);
  EXPECT_EQ(a.path_style, b.path_style);
  EXPECT_EQ(a.access_key_id, b.access_key_id);
  EXPECT_EQ(a.secret_access_key, b.secret_access_key);
  EXPECT_EQ(a.session_token, b.session_token);
  EXPECT_EQ(a.credentials_file, b.credentials_file);
  EXPECT_EQ(a.profile, b.profile);
  EXPECT_EQ(a.ca_file, b.ca_file);
  EXPECT_EQ(a.connect_timeout, b.connect_timeout);
  EXPECT_EQ(a.request_timeout, b.request_timeout);
  EXPECT_EQ(a.idle_timeout, b.idle_timeout);
  EXPECT_EQ(a.max_attempts, b.max_attempts);
  EXPECT_EQ(a.initial_backoff, b.initial_backoff);
  EXPECT_EQ(a.max_backoff, b.max_backoff);
  EXPECT_EQ(a.multipart_threshold, b.multipart_threshold);
  EXPECT_EQ(a.part_size, b.part_size);
}

// Every field of two DaemonOptions, one expectation each.
inline void ExpectSameOptions(const DaemonOptions& a, const DaemonOptions& b) {
  EXPECT_EQ(a.listen_address, b.listen_address);
  EXPECT_EQ(a.host_name, b.host_name);
  EXPECT_EQ(a.socket_path, b.socket_path);
  EXPECT_EQ(a.store_dir, b.store_dir);
  EXPECT_EQ(a.max_duration, b.max_duration);
  EXPECT_EQ(a.start_delay, b.start_delay);
  EXPECT_EQ(a.result_grace, b.result_grace);
  EXPECT_EQ(a.ready_file, b.ready_file);
  EXPECT_EQ(a.log_level, b.log_level);
  EXPECT_EQ(a.insecure, b.insecure);
  EXPECT_EQ(a.metrics.listen, b.metrics.listen);
  EXPECT_EQ(a.metrics.allow_insecure, b.metrics.allow_insecure);
  EXPECT_EQ(a.host_context.sampler.frequency_hz, b.host_context.sampler.frequency_hz);
  EXPECT_EQ(a.host_context.sampler.max_samples, b.host_context.sampler.max_samples);
  EXPECT_EQ(a.host_context.sampler.ring_pages, b.host_context.sampler.ring_pages);
  EXPECT_EQ(a.max_payload_bytes, b.max_payload_bytes);
  EXPECT_EQ(a.max_buffer_bytes, b.max_buffer_bytes);
  EXPECT_EQ(a.retention.max_bytes, b.retention.max_bytes);
  EXPECT_EQ(a.retention.max_age, b.retention.max_age);
  EXPECT_EQ(a.retention.max_count, b.retention.max_count);
  EXPECT_EQ(a.socket_mode, b.socket_mode);
  EXPECT_EQ(a.socket_group, b.socket_group);
  EXPECT_EQ(a.allowed_users, b.allowed_users);
  EXPECT_EQ(a.hello_rate, b.hello_rate);
  EXPECT_EQ(a.hello_burst, b.hello_burst);
  EXPECT_EQ(a.dyno_rpc_listen, b.dyno_rpc_listen);
  EXPECT_EQ(a.kineto_server.mode, b.kineto_server.mode);
  EXPECT_EQ(a.kineto_socket_dir, b.kineto_socket_dir);
  EXPECT_EQ(a.kineto.max_processes, b.kineto.max_processes);
  EXPECT_EQ(a.kineto.max_trace_bytes, b.kineto.max_trace_bytes);
  EXPECT_EQ(a.kineto.max_total_bytes, b.kineto.max_total_bytes);
  EXPECT_EQ(a.kineto.poll_period, b.kineto.poll_period);
  EXPECT_EQ(a.kineto.warmup_secs, b.kineto.warmup_secs);
  EXPECT_EQ(a.s3_store.upload_wait, b.s3_store.upload_wait);
  EXPECT_EQ(a.s3_store.keep_local, b.s3_store.keep_local);
  EXPECT_EQ(a.s3_store.upload_retry_max, b.s3_store.upload_retry_max);
  EXPECT_EQ(a.s3_store.shutdown_wait, b.s3_store.shutdown_wait);
  EXPECT_EQ(scheduler::CanonicalScheduleText(a.schedule),
            scheduler::CanonicalScheduleText(b.schedule));
  EXPECT_EQ(a.auth_token_file, b.auth_token_file);
  ASSERT_EQ(a.auth_tokens.size(), b.auth_tokens.size());
  for (size_t i = 0; i < a.auth_tokens.size(); ++i) {
    EXPECT_EQ(a.auth_tokens[i].token_file, b.auth_tokens[i].token_file);
    EXPECT_EQ(a.auth_tokens[i].scope.name, b.auth_tokens[i].scope.name);
    EXPECT_EQ(a.auth_tokens[i].scope.jobs, b.auth_tokens[i].scope.jobs);
    EXPECT_EQ(a.auth_tokens[i].scope.namespaces, b.auth_tokens[i].scope.namespaces);
    EXPECT_EQ(a.auth_tokens[i].scope.labels, b.auth_tokens[i].scope.labels);
  }
  EXPECT_EQ(a.schedule.worker_threads, b.schedule.worker_threads);
  EXPECT_EQ(a.schedule.worker_nice, b.schedule.worker_nice);
  EXPECT_EQ(a.schedule.worker_idle, b.schedule.worker_idle);
  ASSERT_EQ(a.s3.has_value(), b.s3.has_value());
  if (a.s3.has_value()) ExpectSameS3Config(*a.s3, *b.s3);
}

}  // namespace gpuctl::daemon::testing

#endif  // GPUCTL_DAEMON_CONFIG_TESTING_EXPECT_OPTIONS_H_
