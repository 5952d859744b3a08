#include "daemon/config/daemon_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/log.h"
#include "daemon/config/config_schema.h"
#include "daemon/config/config_values.h"
#include "daemon/config/yaml_document.h"
#include "yaml-cpp/yaml.h"

namespace gpuctl::daemon {
namespace {

// Payloads are mapped into the daemon whole; beyond this a trace is better
// cut into shorter windows.
constexpr uint64_t kMinTraceBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxTraceBytes = uint64_t{64} << 30;

absl::Status ReadNonEmptyString(const ConfigValue& v, std::string* out) {
  absl::StatusOr<std::string> s = v.String();
  if (s.ok() && s->empty()) return v.Error("must not be empty");
  return StoreTo(std::move(s), out);
}

absl::Status ReadTraceBytes(const ConfigValue& v, uint64_t* out) {
  absl::StatusOr<uint64_t> bytes = v.Size();
  if (bytes.ok() && (*bytes < kMinTraceBytes || *bytes > kMaxTraceBytes)) {
    return v.Error(absl::StrCat(FormatByteSize(*bytes), " is out of range (",
                                FormatByteSize(kMinTraceBytes), " to ",
                                FormatByteSize(kMaxTraceBytes), ")"));
  }
  return StoreTo(std::move(bytes), out);
}

absl::Status ReadIngestBytes(const ConfigValue& v, uint64_t* out) {
  absl::StatusOr<uint64_t> bytes = v.Size();
  if (bytes.ok() && *bytes != 0 && (*bytes < kMinIngestBytes || *bytes > kMaxIngestBytes)) {
    return v.Error(absl::StrCat(FormatByteSize(*bytes), " is out of range (0 for no cap, or ",
                                FormatByteSize(kMinIngestBytes), " to ",
                                FormatByteSize(kMaxIngestBytes), ")"));
  }
  return StoreTo(std::move(bytes), out);
}

absl::Status CheckTraceSection(const ConfigLocations& where, DaemonOptions* o) {
  if (o->max_buffer_bytes > o->max_payload_bytes) {
    // Report it where the file set either (a default is never wrong alone).
    std::string key = where.Line("trace.max_buffer_bytes") != 0 ? "trace.max_buffer_bytes"
                                                                : "trace.max_payload_bytes";
    return where.Error(
        key, absl::StrCat("max_buffer_bytes (", FormatByteSize(o->max_buffer_bytes),
                          ") is above max_payload_bytes (", FormatByteSize(o->max_payload_bytes),
                          "): a process's buffer must fit in one payload"));
  }
  return absl::OkStatus();
}

absl::Span<const ConfigKey> TraceKeys() {
  static constexpr ConfigKey kKeys[] = {
      {.name = "max_duration",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return StoreTo(v.Duration(ZeroDuration::kRefused), &o->max_duration);
           }},
      {.name = "start_delay",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             absl::StatusOr<absl::Duration> delay = v.Duration(ZeroDuration::kAllowed);
             if (delay.ok() && *delay > kMaxStartDelay) {
               return v.Error(absl::StrCat(FormatConfigDuration(*delay), " is more than ",
                                           FormatConfigDuration(kMaxStartDelay)));
             }
             return StoreTo(std::move(delay), &o->start_delay);
           }},
      {.name = "result_grace",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return StoreTo(v.Duration(ZeroDuration::kRefused), &o->result_grace);
           }},
      {.name = "max_payload_bytes",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return ReadTraceBytes(v, &o->max_payload_bytes); }},
      {.name = "max_buffer_bytes",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return ReadTraceBytes(v, &o->max_buffer_bytes); }},
      {.name = "max_ingest_bytes",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return ReadIngestBytes(v, &o->max_ingest_bytes); }},
  };
  return kKeys;
}

absl::Span<const ConfigKey> RetentionKeys() {
  static constexpr ConfigKey kKeys[] = {
      {.name = "max_bytes",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return StoreTo(v.Size(), &o->retention.max_bytes); }},
      {.name = "max_age",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return StoreTo(v.Duration(ZeroDuration::kAllowed), &o->retention.max_age);
           }},
      {.name = "max_count",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             return StoreTo(v.Count(0, std::numeric_limits<uint64_t>::max()),
                            &o->retention.max_count);
           }},
  };
  return kKeys;
}

absl::Span<const ConfigKey> StoreKeys() {
  static constexpr ConfigKey kKeys[] = {
      {.name = "path",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return ReadNonEmptyString(v, &o->store_dir); }},
      {.name = "retention", .keys = RetentionKeys},
      {.name = "s3", .keys = S3ConfigKeys, .open = OpenS3Section, .check = CheckS3Section},
  };
  return kKeys;
}

absl::Span<const ConfigKey> TopLevelKeys() {
  static constexpr ConfigKey kKeys[] = {
      {.name = "listen",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return ReadNonEmptyString(v, &o->listen_address); }},
      {.name = "listen_mode",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return ReadSocketMode(v, &o->listen_mode); }},
      {.name = "listen_group",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return ReadGroupName(v, &o->listen_group); }},
      {.name = "host_name",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             absl::StatusOr<std::string> name = v.String();
             if (!name.ok()) return name.status();
             if (absl::Status s = CheckHostName(*name); !s.ok()) return v.Error(s.message());
             o->host_name = *std::move(name);
             return absl::OkStatus();
           }},
      {.name = "insecure",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return StoreTo(v.Bool(), &o->insecure); }},
      {.name = "socket",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return ReadNonEmptyString(v, &o->socket_path); }},
      {.name = "log_level",
       .read =
           [](const ConfigValue& v, DaemonOptions* o) {
             absl::StatusOr<std::string> text = v.String();
             if (!text.ok()) return text.status();
             if (!ParseLogLevel(*text, &o->log_level)) {
               return v.Error(absl::StrCat(QuoteConfigText(*text),
                                           " is not a log level (debug, info, warning, error)"));
             }
             return absl::OkStatus();
           }},
      {.name = "ready_file",
       .read = [](const ConfigValue& v,
                  DaemonOptions* o) { return StoreTo(v.String(), &o->ready_file); }},
      {.name = "ipc", .keys = IpcConfigKeys},
      {.name = "kineto", .keys = KinetoConfigKeys},
      {.name = "tls", .keys = TlsConfigKeys},
      {.name = "auth", .keys = AuthConfigKeys},
      {.name = "metrics", .keys = MetricsConfigKeys},
      {.name = "host_context", .keys = HostContextConfigKeys},
      {.name = "trace", .keys = TraceKeys, .check = CheckTraceSection},
      {.name = "store", .keys = StoreKeys},
      {.name = "schedule", .keys = ScheduleConfigKeys, .check = CheckScheduleSection},
  };
  return kKeys;
}

// Reads one parsed document into the options.
class ConfigReader {
 public:
  ConfigReader(std::string file, DaemonOptions* options)
      : where_(file), file_(std::move(file)), options_(options) {}

  absl::Status ReadSection(const YAML::Node& node, const std::string& path, int line,
                           absl::Span<const ConfigKey> keys);

  ConfigLocations TakeLocations() { return std::move(where_); }

 private:
  absl::Status ReadKey(const ConfigKey& key, const YAML::Node& key_node, const YAML::Node& value,
                       const std::string& path);
  absl::Status Fail(int line, absl::string_view path, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", path, ": ", message));
  }

  ConfigLocations where_;
  std::string file_;
  DaemonOptions* options_;
};

std::string JoinKeyPath(absl::string_view section, absl::string_view name) {
  return section.empty() ? std::string(name) : absl::StrCat(section, ".", name);
}

std::string KnownKeys(absl::Span<const ConfigKey> keys) {
  return absl::StrJoin(
      keys, ", ", [](std::string* out, const ConfigKey& key) { absl::StrAppend(out, key.name); });
}

absl::Status ConfigReader::ReadSection(const YAML::Node& node, const std::string& path, int line,
                                       absl::Span<const ConfigKey> keys) {
  // A section with every key commented out is empty, not an error.
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsMap()) {
    return Fail(line, path,
                absl::StrCat("expected a section (keys ", KnownKeys(keys), "), found ",
                             DescribeNodeType(node)));
  }
  absl::flat_hash_map<std::string, int> seen;
  for (const auto& entry : node) {
    const YAML::Node& key_node = entry.first;
    int key_line = LineOf(key_node);
    if (!key_node.IsScalar()) {
      return Fail(key_line, path.empty() ? "top level" : path,
                  absl::StrCat("a key must be a name, found ", DescribeNodeType(key_node)));
    }
    const std::string& name = key_node.Scalar();
    std::string key_path = JoinKeyPath(path, absl::CHexEscape(name));
    auto [first, inserted] = seen.try_emplace(name, key_line);
    if (!inserted) {
      return Fail(key_line, key_path,
                  absl::StrCat("set twice (first on line ", first->second, ")"));
    }
    const ConfigKey* key = nullptr;
    for (const ConfigKey& candidate : keys) {
      if (candidate.name == name) key = &candidate;
    }
    if (key == nullptr) {
      return Fail(key_line, key_path,
                  absl::StrCat("unknown key (", path.empty() ? "the file" : path, " takes ",
                               KnownKeys(keys), ")"));
    }
    if (absl::Status s = ReadKey(*key, key_node, entry.second, key_path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ConfigReader::ReadKey(const ConfigKey& key, const YAML::Node& key_node,
                                   const YAML::Node& value, const std::string& path) {
  int line = LineOf(key_node);
  where_.Record(path, line);
  if (key.read != nullptr) {
    return key.read(ConfigValue(value, path, line, file_, key.secret), options_);
  }
  if (key.open != nullptr) key.open(options_);
  if (absl::Status s = ReadSection(value, path, line, key.keys()); !s.ok()) return s;
  return key.check != nullptr ? key.check(where_, options_) : absl::OkStatus();
}

void CollectKeys(absl::Span<const ConfigKey> keys, const std::string& prefix,
                 std::vector<std::string>* out) {
  for (const ConfigKey& key : keys) {
    std::string path = JoinKeyPath(prefix, key.name);
    if (key.read != nullptr) {
      out->push_back(std::move(path));
    } else {
      CollectKeys(key.keys(), path, out);
    }
  }
}

}  // namespace

absl::Status ReadConfigMapping(const ConfigValue& value, absl::Span<const ConfigKey> keys,
                               DaemonOptions* options) {
  ConfigReader reader{value.file(), options};
  return reader.ReadSection(value.node(), value.key(), value.line(), keys);
}

int ConfigLocations::Line(absl::string_view key) const {
  auto it = lines_.find(key);
  return it == lines_.end() ? 0 : it->second;
}

absl::Status ConfigLocations::Error(absl::string_view key, absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(file_, ":", Line(key), ": ", key, ": ", message));
}

absl::StatusOr<ConfigLocations> ParseDaemonConfig(absl::string_view text,
                                                  absl::string_view file_name,
                                                  DaemonOptions* options) {
  if (text.size() > kMaxConfigFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": larger than ",
                                                   FormatByteSize(kMaxConfigFileBytes),
                                                   "; not a gpuctld configuration"));
  }
  absl::StatusOr<YAML::Node> root = LoadSingleYamlDocument(text, file_name);
  if (!root.ok()) return root.status();
  if (!root->IsNull() && !root->IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ":", LineOf(*root), ": expected a mapping of keys (",
                     KnownKeys(TopLevelKeys()), "), found ", DescribeNodeType(*root)));
  }
  DaemonOptions updated = *options;
  ConfigReader reader{std::string(file_name), &updated};
  if (absl::Status s = reader.ReadSection(*root, "", 1, TopLevelKeys()); !s.ok()) return s;
  *options = std::move(updated);
  return reader.TakeLocations();
}

absl::StatusOr<ConfigLocations> LoadDaemonConfigFile(const std::string& path,
                                                     DaemonOptions* options) {
  auto fail = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read config file ", path, ": ", why));
  };
  // O_NONBLOCK: opening a FIFO must not hang startup; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail(std::strerror(errno));
  std::string text;
  struct stat st = {};
  absl::Status status;
  if (::fstat(fd, &st) != 0) {
    status = fail(std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = fail(S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
  } else {
    char buffer[16384];
    while (status.ok() && text.size() <= kMaxConfigFileBytes) {
      ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) status = fail(std::strerror(errno));
      if (n <= 0) break;
      text.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return ParseDaemonConfig(text, path, options);
}

std::vector<std::string> DaemonConfigKeys() {
  std::vector<std::string> keys;
  CollectKeys(TopLevelKeys(), "", &keys);
  return keys;
}

}  // namespace gpuctl::daemon
