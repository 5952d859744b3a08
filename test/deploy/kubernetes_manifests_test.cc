// Keeps deploy/kubernetes/daemonset/base/daemonset.yaml consistent with
// configmap.yaml beside it:
// the file gpuctld is told to read (--config) is where the ConfigMap's key
// is mounted, and the S3 credentials file the example config names is where
// the Secret is projected.
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace {

constexpr char kDaemonSetPath[] =
    GPUCTL_SOURCE_DIR "/deploy/kubernetes/daemonset/base/daemonset.yaml";
constexpr char kConfigMapPath[] =
    GPUCTL_SOURCE_DIR "/deploy/kubernetes/daemonset/base/configmap.yaml";

YAML::Node FindDocument(const char* path, const std::string& kind) {
  for (const YAML::Node& doc : YAML::LoadAllFromFile(path)) {
    if (doc["kind"] && doc["kind"].as<std::string>() == kind) return doc;
  }
  ADD_FAILURE() << "no " << kind << " in " << path;
  return YAML::Node();
}

YAML::Node FindByName(const YAML::Node& list, const std::string& name) {
  for (const YAML::Node& item : list) {
    if (item["name"] && item["name"].as<std::string>() == name) return item;
  }
  return YAML::Node();
}

struct SplitPath {
  std::string dir;
  std::string file;
};

SplitPath Split(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

class KubernetesManifestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_set_ = FindDocument(kDaemonSetPath, "DaemonSet");
    config_map_ = FindDocument(kConfigMapPath, "ConfigMap");
    ASSERT_TRUE(daemon_set_ && config_map_);
    const YAML::Node containers = daemon_set_["spec"]["template"]["spec"]["containers"];
    container_ = FindByName(containers, "gpuctld");
    ASSERT_TRUE(container_) << "no gpuctld container in the DaemonSet";
  }

  // The value of --config=PATH or "--config PATH" in the container's args.
  std::vector<std::string> ConfigFlags() const {
    std::vector<std::string> found;
    const YAML::Node args = container_["args"];
    for (size_t i = 0; args && i < args.size(); ++i) {
      std::string arg = args[i].as<std::string>();
      if (arg.rfind("--config=", 0) == 0) found.push_back(arg.substr(9));
      if (arg == "--config" && i + 1 < args.size()) found.push_back(args[i + 1].as<std::string>());
    }
    return found;
  }

  // The pod volume mounted at `dir` in the gpuctld container.
  YAML::Node VolumeMountedAt(const std::string& dir) const {
    for (const YAML::Node& mount : container_["volumeMounts"]) {
      if (mount["mountPath"].as<std::string>() == dir) {
        EXPECT_TRUE(mount["readOnly"] && mount["readOnly"].as<bool>())
            << dir << " is not mounted read-only";
        return FindByName(daemon_set_["spec"]["template"]["spec"]["volumes"],
                          mount["name"].as<std::string>());
      }
    }
    return YAML::Node();
  }

  YAML::Node daemon_set_;
  YAML::Node config_map_;
  YAML::Node container_;
};

// The file name a volume source gives to `key` (the key itself unless
// items map it).
std::string PathOfKey(const YAML::Node& source, const std::string& key) {
  if (!source["items"]) return key;
  for (const YAML::Node& item : source["items"]) {
    if (item["key"].as<std::string>() == key) return item["path"].as<std::string>();
  }
  return "";
}

// The `kind` ("configMap" or "secret") sources named `name` of a volume,
// plain or projected.
std::vector<YAML::Node> SourcesNamed(const YAML::Node& volume, const char* kind,
                                     const std::string& name) {
  std::vector<YAML::Node> found;
  const char* name_key = std::string(kind) == "secret" ? "secretName" : "name";
  if (volume[kind] && volume[kind][name_key].as<std::string>() == name) {
    found.push_back(volume[kind]);
  }
  if (volume["projected"]) {
    for (const YAML::Node& source : volume["projected"]["sources"]) {
      if (source[kind] && source[kind]["name"].as<std::string>() == name) {
        found.push_back(source[kind]);
      }
    }
  }
  return found;
}

TEST_F(KubernetesManifestsTest, ConfigFlagNamesTheMountedConfigMapKey) {
  std::vector<std::string> flags = ConfigFlags();
  ASSERT_EQ(flags.size(), 1u) << "the gpuctld container must pass --config once";
  const SplitPath config = Split(flags[0]);

  EXPECT_EQ(daemon_set_["metadata"]["namespace"].as<std::string>(),
            config_map_["metadata"]["namespace"].as<std::string>());
  const YAML::Node volume = VolumeMountedAt(config.dir);
  ASSERT_TRUE(volume) << "nothing is mounted at " << config.dir << " (--config=" << flags[0] << ")";
  const std::string config_map_name = config_map_["metadata"]["name"].as<std::string>();
  std::vector<YAML::Node> sources = SourcesNamed(volume, "configMap", config_map_name);
  ASSERT_EQ(sources.size(), 1u) << "the volume at " << config.dir << " does not hold ConfigMap "
                                << config_map_name;

  bool found = false;
  for (const auto& entry : config_map_["data"]) {
    if (PathOfKey(sources[0], entry.first.as<std::string>()) == config.file) found = true;
  }
  EXPECT_TRUE(found) << "no key of ConfigMap " << config_map_name << " is mounted as " << flags[0];
}

TEST_F(KubernetesManifestsTest, TheCredentialsFileOfTheExampleIsTheProjectedSecret) {
  // The example's (commented) store.s3.credentials_file.
  const std::string config = config_map_["data"]["gpuctld.yaml"].as<std::string>();
  std::smatch match;
  ASSERT_TRUE(std::regex_search(config, match, std::regex(R"(credentials_file: (\S+))")))
      << "the example config names no credentials_file";
  const SplitPath credentials = Split(match[1].str());

  const YAML::Node volume = VolumeMountedAt(credentials.dir);
  ASSERT_TRUE(volume) << "nothing is mounted at " << credentials.dir;
  ASSERT_TRUE(volume["projected"]) << credentials.dir << " is not a projected volume";
  int secrets = 0;
  for (const YAML::Node& source : volume["projected"]["sources"]) {
    if (!source["secret"] ||
        source["secret"]["name"].as<std::string>() != "gpuctld-s3-credentials") {
      continue;
    }
    ++secrets;
    // Optional: without S3 uploads the Secret need not exist.
    EXPECT_TRUE(source["secret"]["optional"] && source["secret"]["optional"].as<bool>());
    EXPECT_EQ(PathOfKey(source["secret"], "credentials"), credentials.file);
  }
  EXPECT_EQ(secrets, 1);
}

// The mode a projected volume gives the file at `path` (inside it).
int ProjectedMode(const YAML::Node& volume, const std::string& path) {
  for (const YAML::Node& source : volume["projected"]["sources"]) {
    for (const char* kind : {"secret", "configMap"}) {
      if (!source[kind] || !source[kind]["items"]) continue;
      for (const YAML::Node& item : source[kind]["items"]) {
        if (item["path"].as<std::string>() != path) continue;
        return item["mode"] ? item["mode"].as<int>() : volume["projected"]["defaultMode"].as<int>();
      }
    }
  }
  return -1;
}

TEST_F(KubernetesManifestsTest, TheTlsAndTokenFilesAreProjectedFromSecrets) {
  // Secure by default: the files the TLS and token flags name exist in the
  // pod, from required Secrets, and the token only its owner may read
  // (gpuctld refuses it otherwise).
  const YAML::Node volume = VolumeMountedAt("/etc/gpuctl");
  ASSERT_TRUE(volume && volume["projected"]);
  for (const char* flag : {"--tls-cert=", "--tls-key=", "--tls-client-ca=", "--auth-token-file="}) {
    std::string value;
    for (const YAML::Node& arg : container_["args"]) {
      const std::string text = arg.as<std::string>();
      if (text.rfind(flag, 0) == 0) value = text.substr(std::string(flag).size());
    }
    ASSERT_EQ(value.rfind("/etc/gpuctl/", 0), 0u) << flag << value;
    const int mode = ProjectedMode(volume, value.substr(std::string("/etc/gpuctl/").size()));
    EXPECT_NE(mode, -1) << flag << value << " is not projected";
    if (std::string(flag) == "--auth-token-file=") {
      EXPECT_EQ(mode & 077, 0) << value;
    }
  }
  for (const YAML::Node& source : volume["projected"]["sources"]) {
    if (!source["secret"]) continue;
    const std::string name = source["secret"]["name"].as<std::string>();
    if (name == "gpuctld-tls" || name == "gpuctld-token") {
      EXPECT_FALSE(source["secret"]["optional"] && source["secret"]["optional"].as<bool>())
          << name << " must be required";
    }
  }
}

TEST_F(KubernetesManifestsTest, TheFlagsMatchTheMounts) {
  // --store and --socket live on the host paths the DaemonSet mounts.
  for (const char* flag : {"--store=", "--socket="}) {
    std::string value;
    for (const YAML::Node& arg : container_["args"]) {
      std::string text = arg.as<std::string>();
      if (text.rfind(flag, 0) == 0) value = text.substr(std::string(flag).size());
    }
    ASSERT_FALSE(value.empty()) << flag;
    bool mounted = false;
    for (const YAML::Node& mount : container_["volumeMounts"]) {
      const std::string dir = mount["mountPath"].as<std::string>();
      if (value == dir || value.rfind(dir + "/", 0) == 0) mounted = true;
    }
    EXPECT_TRUE(mounted) << flag << value << " is not under a mounted volume";
  }
}

}  // namespace
