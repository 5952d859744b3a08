#include "cli/host_list.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Targets(const std::vector<HostEntry>& entries) {
  std::vector<std::string> targets;
  for (const HostEntry& e : entries) targets.push_back(e.target);
  return targets;
}

class CliHostListTest : public ::testing::Test {
 protected:
  CliHostListTest() {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-hosts-test-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  ~CliHostListTest() override { fs::remove_all(dir_); }
  std::string WriteFile(const std::string& content) {
    std::string path = (fs::path(dir_) / "hosts").string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string dir_;
};

TEST_F(CliHostListTest, DefaultsToEnvironmentThenLocalDaemon) {
  absl::StatusOr<std::vector<HostSpec>> specs = ParseHostFlags({}, "");
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ(Targets(*ResolveHostSpecs(*specs)), std::vector<std::string>{"127.0.0.1:7070"});
  specs = ParseHostFlags({}, "node9");
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ(Targets(*ResolveHostSpecs(*specs)), std::vector<std::string>{"node9:7070"});
  EXPECT_THAT(ParseHostFlags({}, "node9:0").status().message(), HasSubstr("$GPUCTL_HOST"));
  // Given hosts win over the environment.
  HostFlags flags;
  flags.hosts = {"a"};
  EXPECT_EQ(Targets(*ResolveHostSpecs(*ParseHostFlags(flags, "node9"))),
            std::vector<std::string>{"a:7070"});
}

TEST_F(CliHostListTest, HostsFileWithCommentsAndDuplicates) {
  HostFlags flags;
  flags.hosts = {"node1", "node2:7071"};
  flags.hosts_files = {
      WriteFile("# the fleet\n"
                "node3\n"
                "\n"
                "   node1:7070   # same as --host node1\n"
                "[fd00::7]:7000\r\n"
                "fd00::8\n"
                "node2:7071\n")};
  absl::StatusOr<std::vector<HostSpec>> specs = ParseHostFlags(flags, "ignored");
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT(
      Targets(*ResolveHostSpecs(*specs)),
      ElementsAre("node1:7070", "node2:7071", "node3:7070", "[fd00::7]:7000", "[fd00::8]:7070"));
}

TEST_F(CliHostListTest, HostsFileErrorsNameTheLine) {
  HostFlags flags;
  flags.hosts_files = {WriteFile("node1\nnode2:99999\n")};
  absl::Status s = ParseHostFlags(flags, "").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(flags.hosts_files[0] + ":2: invalid host \"node2:99999\""));

  flags.hosts_files = {WriteFile("node1 node2\n")};
  EXPECT_THAT(ParseHostFlags(flags, "").status().message(), HasSubstr(":1: one host per line"));
  flags.hosts_files = {WriteFile("# nothing\n\n")};
  EXPECT_THAT(ParseHostFlags(flags, "").status().message(), HasSubstr("no host in the file"));
  flags.hosts_files = {(fs::path(dir_) / "absent").string()};
  EXPECT_THAT(ParseHostFlags(flags, "").status().message(), HasSubstr("cannot read"));
}

TEST_F(CliHostListTest, DnsSpecs) {
  absl::StatusOr<HostSpec> spec = ParseDnsSpec("dns:gpuctl.ml.svc.cluster.local");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dns_name, "gpuctl.ml.svc.cluster.local");
  EXPECT_EQ(spec->dns_port, 7070);
  spec = ParseDnsSpec("dns:gpuctl:7443");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->dns_port, 7443);
  spec = ParseDnsSpec("dns:[::1]:7001");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dns_name, "::1");
  EXPECT_EQ(spec->dns_port, 7001);
  for (const char* bad : {"dns:", "dns:a:", "dns:a:0", "dns:a:65536", "dns:a b", "dns:a:1:2",
                          "dns:[::1", "dns:[nope]", "dns:[::1]x", "node1"}) {
    absl::StatusOr<HostSpec> parsed = ParseDnsSpec(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("dns:NAME")) << bad;
  }
  HostFlags flags;
  flags.dns = {"node1"};
  EXPECT_THAT(ParseHostFlags(flags, "").status().message(), HasSubstr("--hosts:"));
}

TEST_F(CliHostListTest, DnsLocalhostResolvesEveryAddress) {
  HostFlags flags;
  flags.dns = {"dns:localhost:7123"};
  flags.hosts = {"127.0.0.1:7123"};  // the same daemon, given twice
  absl::StatusOr<std::vector<HostSpec>> specs = ParseHostFlags(flags, "");
  ASSERT_TRUE(specs.ok()) << specs.status();
  absl::StatusOr<std::vector<HostEntry>> hosts = ResolveHostSpecs(*specs);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  std::vector<std::string> targets = Targets(*hosts);
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(targets[0], "127.0.0.1:7123");
  for (const std::string& t : targets) {
    EXPECT_TRUE(t == "127.0.0.1:7123" || t == "[::1]:7123") << t;
  }
  EXPECT_EQ(std::count(targets.begin(), targets.end(), "127.0.0.1:7123"), 1);
}

TEST_F(CliHostListTest, ResolverAnswersAreExpandedAndFailuresKept) {
  HostFlags flags;
  flags.hosts_files = {WriteFile("dns:workers:7001\ndns:gone\n")};
  auto resolver = [](const std::string& name) -> absl::StatusOr<std::vector<std::string>> {
    if (name == "workers") return std::vector<std::string>{"10.0.0.1", "fd00::2", "10.0.0.1"};
    return absl::UnavailableError("cannot resolve gone: Name or service not known");
  };
  absl::StatusOr<std::vector<HostEntry>> hosts =
      ResolveHostSpecs(*ParseHostFlags(flags, ""), resolver);
  ASSERT_TRUE(hosts.ok());
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].target, "10.0.0.1:7001");
  EXPECT_EQ((*hosts)[1].target, "[fd00::2]:7001");
  EXPECT_EQ((*hosts)[2].target, "dns:gone");
  EXPECT_THAT((*hosts)[2].error, HasSubstr("Name or service not known"));
}

TEST_F(CliHostListTest, RealResolverFailureIsAnError) {
  absl::StatusOr<std::vector<std::string>> addresses = ResolveAddresses("no-such-host.invalid");
  EXPECT_FALSE(addresses.ok());
  EXPECT_THAT(addresses.status().message(), HasSubstr("cannot resolve no-such-host.invalid"));
}

}  // namespace
}  // namespace gpuctl::cli
