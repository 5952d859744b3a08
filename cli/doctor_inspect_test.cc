#include "cli/doctor_inspect.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "cli/doctor_command.h"
#include "cli/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kPid = 4242;
// A uid and gid nobody here has: the fake process is a stranger to every
// file the test makes.
constexpr uid_t kStrangerUid = 54321;
constexpr gid_t kStrangerGid = 54322;

class DoctorInspectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuctl-doctor-XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
    // Searchable by the fake process's stranger uid, as /tmp is.
    fs::permissions(root_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    proc_ = root_ + "/proc";
    fs::create_directories(absl::StrCat(proc_, "/", kPid));
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
    fs::permissions(root_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(root_);
  }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(absl::StrCat(proc_, "/", kPid, "/", name), std::ios::binary) << text;
  }

  // A live process of the stranger uid, its library mapped, started with
  // `environ` ("K=V" entries).
  void FakeProcess(const std::vector<std::string>& environ, bool with_library = true,
                   const std::string& state = "S (sleeping)") {
    Write("status",
          absl::StrCat("Name:\ttrain\nState:\t", state, "\nUid:\t", kStrangerUid, "\t",
                       kStrangerUid, "\t", kStrangerUid, "\t", kStrangerUid, "\nGid:\t",
                       kStrangerGid, "\t", kStrangerGid, "\t", kStrangerGid, "\t", kStrangerGid,
                       "\nGroups:\t", kStrangerGid, " 27 \nCapEff:\t0000000000000000\n"));
    std::string maps =
        "55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /usr/bin/python3.11\n"
        "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n";
    if (with_library) {
      maps += "7f1000000000-7f1000100000 r-xp 00000000 08:01 456 /opt/gpuctl/lib/libgpuctl.so\n";
    }
    Write("maps", maps);
    std::string env;
    for (const std::string& e : environ) env += e + '\0';
    Write("environ", env);
  }

  // A SOCK_SEQPACKET socket file at `path` with `mode`; listening or left
  // over from a closed one.
  void MakeSocket(const std::string& path, mode_t mode, bool listening) {
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    ASSERT_LT(path.size(), sizeof(addr.sun_path));
    std::memcpy(addr.sun_path, path.data(), path.size());
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API.
    ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0)
        << std::strerror(errno);
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    if (listening) {
      ASSERT_EQ(listen(fd, 8), 0);
      fds_.push_back(fd);
    } else {
      close(fd);
    }
  }

  Diagnosis Run(const DaemonFacts& daemon) {
    process_ = InspectProcess(kPid, proc_);
    std::optional<SocketFacts> socket;
    if (process_.exists && !process_.zombie) {
      socket = InspectSocket(SocketPathOf(process_), process_.creds);
    }
    DiagnoseOptions options;
    options.library_hint = "/opt/gpuctl/lib/gpuctl/libgpuctl.so";
    return Diagnose(process_, socket, daemon, options);
  }

  static DaemonFacts Unreachable() {
    DaemonFacts d;
    d.target = "127.0.0.1:7070";
    d.error = "connection refused";
    return d;
  }

  DaemonFacts Reached(const std::string& socket_path) const {
    DaemonFacts d;
    d.target = "127.0.0.1:7070";
    d.reached = true;
    d.host = "node1";
    d.socket_path = socket_path;
    return d;
  }

  std::string root_;
  std::string proc_;
  std::vector<int> fds_;
  ProcessFacts process_;
};

std::string AllFindings(const Diagnosis& d) {
  std::string text;
  for (const DoctorFinding& f : d.findings) {
    absl::StrAppend(&text, f.ok ? "ok " : "problem ", f.check, " ", f.text, "\n");
  }
  return text;
}

TEST_F(DoctorInspectTest, ReadsCredentialsLibraryAndOnlyTheLibrarysVariables) {
  FakeProcess({"HOME=/home/x", "AWS_SECRET_ACCESS_KEY=hunter2", "GPUCTL_SOCKET=/tmp/a.sock",
               "RANK=3", "GPUCTL_JOB_ID=42", "GPUCTL_JOB_ID=shadowed",
               "LD_PRELOAD=/x/libgpuctl.so"});
  const ProcessFacts p = InspectProcess(kPid, proc_);
  ASSERT_TRUE(p.exists);
  EXPECT_FALSE(p.zombie);
  EXPECT_EQ(p.name, "train");
  EXPECT_EQ(p.creds.uid, kStrangerUid);
  EXPECT_EQ(p.creds.gid, kStrangerGid);
  EXPECT_EQ(p.creds.groups, (std::vector<gid_t>{kStrangerGid, 27}));
  ASSERT_TRUE(p.library_path.has_value());
  EXPECT_EQ(*p.library_path, "/opt/gpuctl/lib/libgpuctl.so");
  EXPECT_EQ(p.environment.size(), 4u);
  EXPECT_EQ(p.environment.at("GPUCTL_JOB_ID"), "42");
  EXPECT_EQ(p.environment.count("AWS_SECRET_ACCESS_KEY"), 0u);
  EXPECT_EQ(p.environment.count("HOME"), 0u);
  EXPECT_EQ(SocketPathOf(p), "/tmp/a.sock");
  const Diagnosis d = Run(Unreachable());
  EXPECT_THAT(AllFindings(d), Not(HasSubstr("hunter2")));
  EXPECT_THAT(AllFindings(d), HasSubstr("RANK=3"));
}

TEST_F(DoctorInspectTest, RelativeSocketIsTheProcesssWorkingDirectorys) {
  FakeProcess({"GPUCTL_SOCKET=run/../s.sock"});
  fs::create_directory_symlink("/srv/job", absl::StrCat(proc_, "/", kPid, "/cwd"));
  EXPECT_EQ(SocketPathOf(InspectProcess(kPid, proc_)), "/srv/job/s.sock");
  Write("environ", std::string("RANK=0") + '\0');
  EXPECT_EQ(SocketPathOf(InspectProcess(kPid, proc_)), kDefaultLibrarySocket);
}

TEST_F(DoctorInspectTest, NoSuchProcess) {
  ProcessFacts p = InspectProcess(kPid + 1, proc_);
  EXPECT_FALSE(p.exists);
  const Diagnosis missing = Diagnose(p, std::nullopt, Unreachable(), {});
  EXPECT_EQ(missing.cause, DoctorCause::kNoProcess);
  EXPECT_EQ(missing.exit_code, kExitNothingMatched);
  EXPECT_THAT(missing.verdict, HasSubstr(absl::StrCat("no process ", kPid + 1)));
}

TEST_F(DoctorInspectTest, Zombie) {
  FakeProcess({}, /*with_library=*/true, "Z (zombie)");
  const Diagnosis d = Run(Unreachable());
  EXPECT_EQ(d.cause, DoctorCause::kZombie);
  EXPECT_EQ(d.exit_code, kExitNothingMatched);
}

TEST_F(DoctorInspectTest, AttachedWinsAndNamesJobAndRank) {
  FakeProcess({"GPUCTL_SOCKET=/nowhere/x.sock"});
  DaemonFacts daemon = Reached("/elsewhere/y.sock");
  v1::ProcessInfo info;
  info.set_pid(kPid);
  info.set_job_id("42");
  info.set_rank(0);
  daemon.attached = info;
  const Diagnosis d = Run(daemon);
  EXPECT_EQ(d.cause, DoctorCause::kAttached);
  EXPECT_EQ(d.exit_code, kExitOk);
  EXPECT_THAT(d.verdict, HasSubstr("is attached to gpuctld on node1 (job 42, rank 0)"));
  EXPECT_TRUE(d.fix.empty());
}

TEST_F(DoctorInspectTest, NoLibraryLoaded) {
  FakeProcess({"RANK=0"}, /*with_library=*/false);
  const Diagnosis d = Run(Unreachable());
  EXPECT_EQ(d.cause, DoctorCause::kNoLibrary);
  EXPECT_EQ(d.exit_code, kExitPartialFailure);
  EXPECT_EQ(d.verdict, absl::StrCat("pid ", kPid, " has no gpuctl library loaded"));
  EXPECT_THAT(d.fix, HasSubstr("LD_PRELOAD=/opt/gpuctl/lib/gpuctl/libgpuctl.so"));
}

TEST_F(DoctorInspectTest, PreloadOfAMissingLibrary) {
  FakeProcess({"LD_PRELOAD=/gone/libgpuctl.so"}, /*with_library=*/false);
  const Diagnosis d = Run(Unreachable());
  EXPECT_EQ(d.cause, DoctorCause::kNoLibrary);
  EXPECT_THAT(d.verdict, HasSubstr("LD_PRELOAD names /gone/libgpuctl.so, which does not exist"));
}

TEST_F(DoctorInspectTest, CudaInjectionNotYetLoaded) {
  FakeProcess({"CUDA_INJECTION64_PATH=/opt/libgpuctl.so"}, /*with_library=*/false);
  const Diagnosis d = Run(Unreachable());
  EXPECT_EQ(d.cause, DoctorCause::kNoLibrary);
  EXPECT_THAT(d.verdict, HasSubstr("CUDA_INJECTION64_PATH loads it"));
}

TEST_F(DoctorInspectTest, DisabledByEnvironment) {
  FakeProcess({"GPUCTL_DISABLE=1"});
  const Diagnosis d = Run(Unreachable());
  EXPECT_EQ(d.cause, DoctorCause::kDisabled);
  EXPECT_THAT(d.verdict, HasSubstr("GPUCTL_DISABLE=1"));
}

TEST_F(DoctorInspectTest, RefusedByTheAllowList) {
  const std::string sock = root_ + "/gpuctl.sock";
  MakeSocket(sock, 0666, true);
  FakeProcess({"GPUCTL_SOCKET=" + sock});
  DaemonFacts daemon = Reached(sock);
  v1::RejectedAttachment r;
  r.set_pid(kPid);
  r.set_uid(kStrangerUid);
  r.set_reason(absl::StrCat("uid ", kStrangerUid, " may not attach (not in ipc.allowed_uids)"));
  r.set_repeats(2);
  daemon.refusals.push_back(r);
  const Diagnosis d = Run(daemon);
  EXPECT_EQ(d.cause, DoctorCause::kRefused);
  EXPECT_EQ(d.verdict, absl::StrCat("the daemon refused it: uid ", kStrangerUid,
                                    " may not attach (not in ipc.allowed_uids)"));
  EXPECT_THAT(d.fix, HasSubstr(absl::StrCat("add uid ", kStrangerUid, " to ipc.allowed_uids")));
  EXPECT_THAT(AllFindings(d), HasSubstr("(3 times)"));
}

TEST_F(DoctorInspectTest, SocketMismatchWithTheDaemon) {
  const std::string daemon_sock = root_ + "/daemon.sock";
  MakeSocket(daemon_sock, 0666, true);
  FakeProcess({"GPUCTL_SOCKET=" + root_ + "/wrong.sock"});
  const Diagnosis d = Run(Reached(daemon_sock));
  EXPECT_EQ(d.cause, DoctorCause::kSocketMismatch);
  EXPECT_EQ(d.verdict,
            absl::StrCat("the process uses GPUCTL_SOCKET=", root_,
                         "/wrong.sock but the daemon at 127.0.0.1:7070 listens on ", daemon_sock));
  EXPECT_EQ(d.fix, "start it with GPUCTL_SOCKET=" + daemon_sock);
}

TEST_F(DoctorInspectTest, SocketFlagStandsForAnUnreachableDaemon) {
  const std::string daemon_sock = root_ + "/daemon.sock";
  FakeProcess({});
  DaemonFacts daemon = Unreachable();
  daemon.socket_path = daemon_sock;
  daemon.socket_from_flag = true;
  const Diagnosis d = Run(daemon);
  EXPECT_EQ(d.cause, DoctorCause::kSocketMismatch);
  EXPECT_THAT(d.verdict,
              HasSubstr(absl::StrCat("uses the default socket /run/gpuctl/gpuctl.sock but the "
                                     "daemon listens on ",
                                     daemon_sock)));
}

TEST_F(DoctorInspectTest, NoSocketFile) {
  FakeProcess({"GPUCTL_SOCKET=" + root_ + "/absent.sock"});
  const Diagnosis d = Run(Unreachable());
  EXPECT_EQ(d.cause, DoctorCause::kNoSocket);
  EXPECT_EQ(d.verdict, absl::StrCat("no daemon listens on ", root_,
                                    "/absent.sock (No such file or directory)"));
}

TEST_F(DoctorInspectTest, NotASocket) {
  const std::string file = root_ + "/plain";
  std::ofstream(file) << "x";
  FakeProcess({"GPUCTL_SOCKET=" + file});
  const Diagnosis d = Run(Unreachable());
  EXPECT_EQ(d.cause, DoctorCause::kNotASocket);
}

TEST_F(DoctorInspectTest, SocketModeRefusesTheUid) {
  const std::string sock = root_ + "/gpuctl.sock";
  MakeSocket(sock, 0660, true);
  FakeProcess({"GPUCTL_SOCKET=" + sock});
  const Diagnosis d = Run(Reached(sock));
  EXPECT_EQ(d.cause, DoctorCause::kSocketDenied);
  EXPECT_EQ(d.exit_code, kExitPartialFailure);
  EXPECT_THAT(d.verdict, HasSubstr(absl::StrCat("the socket ", sock, " refuses uid ", kStrangerUid,
                                                " (mode 0660 ")));
  // The group may write: joining it is the fix.
  EXPECT_THAT(d.fix, HasSubstr("add the user to group"));
}

TEST_F(DoctorInspectTest, SocketModeForTheOwnerOnlySaysSocketGroup) {
  const std::string sock = root_ + "/gpuctl.sock";
  MakeSocket(sock, 0600, true);
  FakeProcess({"GPUCTL_SOCKET=" + sock});
  const Diagnosis d = Run(Reached(sock));
  EXPECT_EQ(d.cause, DoctorCause::kSocketDenied);
  EXPECT_THAT(d.fix, HasSubstr("--socket-group"));
}

TEST_F(DoctorInspectTest, DirectoryWithoutSearchPermission) {
  const std::string dir = root_ + "/private";
  fs::create_directory(dir);
  const std::string sock = dir + "/gpuctl.sock";
  MakeSocket(sock, 0666, true);
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  FakeProcess({"GPUCTL_SOCKET=" + sock});
  const Diagnosis d = Run(Reached(sock));
  EXPECT_EQ(d.cause, DoctorCause::kDirectoryDenied);
  EXPECT_THAT(d.verdict, HasSubstr(absl::StrCat("the directory ", dir, " refuses uid ",
                                                kStrangerUid, " (mode 0700 ")));
}

TEST_F(DoctorInspectTest, StaleSocketWithoutADaemon) {
  const std::string sock = root_ + "/gpuctl.sock";
  MakeSocket(sock, 0666, /*listening=*/false);
  FakeProcess({"GPUCTL_SOCKET=" + sock});
  const Diagnosis d = Run(Unreachable());
  EXPECT_EQ(d.cause, DoctorCause::kNotListening);
  EXPECT_EQ(d.verdict, absl::StrCat("no daemon listens on ", sock, " (Connection refused)"));
}

TEST_F(DoctorInspectTest, EverythingReadyButTheDaemonCannotBeAsked) {
  const std::string sock = root_ + "/gpuctl.sock";
  MakeSocket(sock, 0666, true);
  FakeProcess({"GPUCTL_SOCKET=" + sock});
  const Diagnosis d = Run(Unreachable());
  EXPECT_EQ(d.cause, DoctorCause::kDaemonUnreachable);
  EXPECT_EQ(d.exit_code, kExitDaemonError);
}

TEST_F(DoctorInspectTest, EverythingReadyButNotListed) {
  const std::string sock = root_ + "/gpuctl.sock";
  MakeSocket(sock, 0666, true);
  FakeProcess({"GPUCTL_SOCKET=" + sock});
  const Diagnosis d = Run(Reached(sock));
  EXPECT_EQ(d.cause, DoctorCause::kUnknown);
  EXPECT_THAT(d.fix, HasSubstr("GPUCTL_DEBUG=1"));
  EXPECT_THAT(AllFindings(d), HasSubstr("ok socket a daemon listens on it"));
  EXPECT_THAT(AllFindings(d), HasSubstr(absl::StrCat("uid ", kStrangerUid, " may connect")));
}

TEST_F(DoctorInspectTest, UnreadableEnvironmentIsSaid) {
  FakeProcess({});
  const std::string environ = absl::StrCat(proc_, "/", kPid, "/environ");
  fs::remove(environ);
  fs::create_directory(environ);  // read() fails with EISDIR, even for root
  const Diagnosis d = Run(Reached(kDefaultLibrarySocket));
  EXPECT_EQ(d.cause, DoctorCause::kUninspectable);
  EXPECT_THAT(d.verdict, HasSubstr("/environ not readable"));
}

TEST_F(DoctorInspectTest, UnreadableForAnotherUidSaysWhoMayRead) {
  FakeProcess({});
  ProcessFacts p = InspectProcess(kPid, proc_);
  // What open() answers for another user's maps without privilege.
  p.maps = ProcRead{false, EACCES, ""};
  p.library_path.reset();
  const Diagnosis d = Diagnose(p, std::nullopt, Unreachable(), {});
  EXPECT_EQ(d.cause, DoctorCause::kUninspectable);
  EXPECT_THAT(d.verdict, HasSubstr(absl::StrCat("/maps not readable (run as root or as uid ",
                                                kStrangerUid, ")")));
  EXPECT_EQ(d.fix, absl::StrCat("run gpuctl doctor as root or as uid ", kStrangerUid));
}

TEST_F(DoctorInspectTest, StartTimeTellsAnEarlierProcessWithThePidApart) {
  FakeProcess({});
  const int64_t hz = sysconf(_SC_CLK_TCK);
  // The command name may hold spaces and parentheses; start: 100 s after boot.
  Write("stat", absl::StrCat(kPid, " (a (b) c) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 ", 100 * hz,
                             " 1000 10\n"));
  std::ofstream(proc_ + "/stat") << "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
  const ProcessFacts p = InspectProcess(kPid, proc_);
  ASSERT_TRUE(p.started_at.has_value());
  EXPECT_EQ(*p.started_at, absl::FromUnixSeconds(1700000100));
  EXPECT_FALSE(RefusalMayBeOf(p, absl::FromUnixSeconds(1700000090)));
  EXPECT_TRUE(RefusalMayBeOf(p, absl::FromUnixSeconds(1700000100)));
  ProcessFacts unknown = p;
  unknown.started_at.reset();
  EXPECT_TRUE(RefusalMayBeOf(unknown, absl::FromUnixSeconds(0)));
}

TEST_F(DoctorInspectTest, CommandPrintsFindingsThenOneVerdictAndTheFix) {
  FakeProcess({"RANK=0"}, /*with_library=*/false);
  std::ostringstream out;
  std::ostringstream err;
  CliEnv env;
  env.out = &out;
  env.err = &err;
  env.connect_timeout = absl::Seconds(2);
  DoctorOptions options;
  options.pid = kPid;
  options.target = "127.0.0.1:1";  // nothing listens: the daemon is not reached
  options.proc_root = proc_;
  options.library_hint = "/usr/lib/gpuctl/libgpuctl.so";
  EXPECT_EQ(RunDoctor(options, env), kExitPartialFailure);
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("problem  library      no libgpuctl in "));
  EXPECT_THAT(text, HasSubstr("ok       environment  RANK=0\n"));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\nverdict: pid ", kPid,
                                           " has no gpuctl library loaded\nfix: start it with "
                                           "LD_PRELOAD=/usr/lib/gpuctl/libgpuctl.so")));
  EXPECT_EQ(text.find("verdict:"), text.rfind("verdict:"));

  std::ostringstream json;
  env.out = &json;
  options.json = true;
  EXPECT_EQ(RunDoctor(options, env), kExitPartialFailure);
  EXPECT_THAT(json.str(), HasSubstr("\"cause\":\"no_library\""));
  EXPECT_THAT(json.str(), HasSubstr("\"environment\":{\"RANK\":\"0\"}"));
  EXPECT_THAT(json.str(), HasSubstr("\"daemonReached\":false"));
  EXPECT_TRUE(err.str().empty()) << err.str();
}

TEST(DoctorUsageTest, PidIsRequiredAndANumber) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"doctor"}, {"doctor", "--pid", "0"}, {"doctor", "--pid", "abc"}}) {
    std::ostringstream out;
    std::ostringstream err;
    CliEnv env;
    env.out = &out;
    env.err = &err;
    EXPECT_EQ(RunCli(args, env), kExitUsage) << args.back();
    EXPECT_THAT(err.str(), HasSubstr("--pid")) << args.back();
  }
  std::ostringstream out;
  CliEnv env;
  env.out = &out;
  EXPECT_EQ(RunCli({"help", "doctor"}, env), kExitOk);
  EXPECT_THAT(out.str(), HasSubstr("--socket"));
}

TEST(DoctorPermitTest, OwnerThenGroupThenOtherAsTheKernelChecks) {
  ProcessCredentials c;
  c.uid = 1001;
  c.gid = 1001;
  c.groups = {27};
  // The owner's bits apply to the owner even when the group's would allow.
  EXPECT_FALSE(CredentialsPermit(c, 1001, 27, 0060, W_OK, false));
  EXPECT_TRUE(CredentialsPermit(c, 0, 27, 0060, W_OK, false));
  EXPECT_TRUE(CredentialsPermit(c, 0, 1001, 0020, W_OK, false));
  EXPECT_FALSE(CredentialsPermit(c, 0, 5, 0660, W_OK, false));
  EXPECT_TRUE(CredentialsPermit(c, 0, 5, 0662, W_OK, false));
  EXPECT_TRUE(CredentialsPermit(c, 0, 5, 0751, X_OK, true));
  EXPECT_FALSE(CredentialsPermit(c, 0, 5, 0750, X_OK, true));
  c.cap_effective = uint64_t{1} << 2;  // CAP_DAC_READ_SEARCH: directories only
  EXPECT_TRUE(CredentialsPermit(c, 0, 5, 0700, X_OK, true));
  EXPECT_FALSE(CredentialsPermit(c, 0, 5, 0600, W_OK, false));
  c.cap_effective = uint64_t{1} << 1;  // CAP_DAC_OVERRIDE
  EXPECT_TRUE(CredentialsPermit(c, 0, 5, 0600, W_OK, false));
}

TEST(DoctorSameSocketTest, ByFileOrByNormalizedPath) {
  EXPECT_TRUE(SameSocket("/run/gpuctl/./gpuctl.sock", "/run//gpuctl/gpuctl.sock"));
  EXPECT_FALSE(SameSocket("/run/gpuctl/a.sock", "/run/gpuctl/b.sock"));
}

}  // namespace
}  // namespace gpuctl::cli
