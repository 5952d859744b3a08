#include "cli/doctor_inspect.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "cli/exit_codes.h"
#include "cli/format.h"

namespace gpuctl::cli {
namespace {

// /proc files are small; a hostile environment is not read without bound.
constexpr size_t kMaxProcFileBytes = size_t{4} << 20;
// Longest environment value shown.
constexpr size_t kMaxValueChars = 512;

constexpr uint64_t kCapDacOverride = uint64_t{1} << 1;
constexpr uint64_t kCapDacReadSearch = uint64_t{1} << 2;

ProcRead ReadProcFile(const std::string& path) {
  ProcRead read;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    read.error = errno;
    return read;
  }
  char buf[8192];
  while (read.text.size() < kMaxProcFileBytes) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      read.error = errno;
      close(fd);
      read.text.clear();
      return read;
    }
    if (n == 0) break;
    read.text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  read.ok = true;
  return read;
}

std::string UserName(uid_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  std::string buf(16384, '\0');
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return absl::StrCat(uid);
}

std::string GroupName(gid_t gid) {
  group gr{};
  group* found = nullptr;
  std::string buf(16384, '\0');
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->gr_name;
  }
  return absl::StrCat(gid);
}

// "uid 1001 (alice)"; the number alone when the name is the number.
std::string UidText(uid_t uid) {
  const std::string name = UserName(uid);
  return name == absl::StrCat(uid) ? absl::StrCat("uid ", uid)
                                   : absl::StrCat("uid ", uid, " (", name, ")");
}

// "0660 root:gpuctl".
std::string ModeText(uint32_t mode, uid_t owner, gid_t group) {
  char octal[8];
  std::snprintf(octal, sizeof(octal), "%04o", mode & 07777);
  return absl::StrCat(octal, " ", UserName(owner), ":", GroupName(group));
}

// Why a /proc file could not be read, in words that say what to do.
std::string UnreadableText(const std::string& path, const ProcRead& read,
                           const ProcessFacts& process) {
  if (read.error == EACCES || read.error == EPERM) {
    return absl::StrCat(path, " not readable (run as root or as uid ",
                        process.status.ok ? absl::StrCat(process.creds.uid) : "of the process",
                        ")");
  }
  return absl::StrCat(path, " not readable: ", std::strerror(read.error));
}

// The fourth (filesystem) id of a "Uid:" / "Gid:" line.
bool ParseFsId(absl::string_view value, uint32_t* id) {
  std::vector<absl::string_view> ids =
      absl::StrSplit(value, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (ids.empty()) return false;
  return absl::SimpleAtoi(ids.size() >= 4 ? ids[3] : ids[0], id);
}

void ParseStatus(ProcessFacts& facts) {
  for (absl::string_view line : absl::StrSplit(facts.status.text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = line.substr(0, colon);
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (key == "Name") {
      facts.name = std::string(value);
    } else if (key == "State") {
      facts.zombie = absl::StartsWith(value, "Z") || absl::StartsWith(value, "X");
    } else if (key == "Uid") {
      uint32_t id = 0;
      if (ParseFsId(value, &id)) facts.creds.uid = id;
    } else if (key == "Gid") {
      uint32_t id = 0;
      if (ParseFsId(value, &id)) facts.creds.gid = id;
    } else if (key == "Groups") {
      for (absl::string_view g : absl::StrSplit(value, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
        uint32_t id = 0;
        if (absl::SimpleAtoi(g, &id)) facts.creds.groups.push_back(id);
      }
    } else if (key == "CapEff") {
      uint64_t caps = 0;
      if (absl::SimpleHexAtoi(value, &caps)) facts.creds.cap_effective = caps;
    }
  }
}

// The path of a maps line: what follows the fifth field.
absl::string_view MappedPath(absl::string_view line) {
  for (int field = 0; field < 5; ++field) {
    const size_t space = line.find(' ');
    if (space == absl::string_view::npos) return {};
    line.remove_prefix(space);
    line = absl::StripLeadingAsciiWhitespace(line);
  }
  return line;
}

bool IsLibgpuctl(absl::string_view path) {
  const size_t slash = path.rfind('/');
  const absl::string_view base = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  return absl::StartsWith(base, "libgpuctl") && absl::StrContains(base, ".so");
}

// "/a/./b//c/../d" -> "/a/b/d", lexically.
std::string NormalizePath(const std::string& path) {
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.emplace_back(part);
  }
  return absl::StrCat(absl::StartsWith(path, "/") ? "/" : "", absl::StrJoin(parts, "/"));
}

std::string EnvValue(const ProcessFacts& p, const std::string& name) {
  auto it = p.environment.find(name);
  return it == p.environment.end() ? "" : it->second;
}

bool EnvSet(const ProcessFacts& p, const std::string& name) {
  return p.environment.count(name) > 0;
}

// The libgpuctl paths LD_PRELOAD names (separated by ':' or blanks).
std::vector<std::string> PreloadedLibraries(const ProcessFacts& p) {
  std::vector<std::string> out;
  for (absl::string_view entry :
       absl::StrSplit(EnvValue(p, "LD_PRELOAD"), absl::ByAnyChar(": \t"), absl::SkipEmpty())) {
    if (IsLibgpuctl(entry)) out.emplace_back(entry);
  }
  return out;
}

std::string JobAndRank(const v1::ProcessInfo& info) {
  return absl::StrCat("job ", info.job_id().empty() ? "-" : Printable(info.job_id()), ", rank ",
                      RankText(info.rank()));
}

void Add(Diagnosis& d, absl::string_view check, bool ok, std::string text) {
  d.findings.push_back({std::string(check), ok, std::move(text)});
}

void Conclude(Diagnosis& d, DoctorCause cause, std::string verdict, std::string fix) {
  d.cause = cause;
  d.verdict = std::move(verdict);
  d.fix = std::move(fix);
  switch (cause) {
    case DoctorCause::kAttached:
      d.exit_code = kExitOk;
      break;
    case DoctorCause::kNoProcess:
    case DoctorCause::kZombie:
      d.exit_code = kExitNothingMatched;
      break;
    case DoctorCause::kDaemonUnreachable:
      d.exit_code = kExitDaemonError;
      break;
    default:
      d.exit_code = kExitPartialFailure;
  }
}

bool InGroups(const ProcessCredentials& c, gid_t gid) {
  return c.gid == gid || std::find(c.groups.begin(), c.groups.end(), gid) != c.groups.end();
}

// How to let the process through a file whose `bit` (2: write, 1: search)
// it lacks.
std::string AccessFix(const ProcessCredentials& c, uid_t owner, gid_t group, uint32_t mode,
                      uint32_t bit, bool is_socket) {
  const std::string user = UserName(c.uid);
  if ((mode & (bit << 3)) != 0 && !InGroups(c, group)) {
    return absl::StrCat("add the user to group ", GroupName(group), " (usermod -aG ",
                        GroupName(group), " ", user,
                        "), then start the process again: it takes its groups when it starts");
  }
  if (is_socket) {
    return absl::StrCat("start gpuctld with --socket-group set to a group of ", user,
                        " (and --socket-mode 0660), or run the process as ", UserName(owner));
  }
  return "let the process search this directory (chmod o+x, or a group it is in), or put the "
         "socket elsewhere (gpuctld --socket and GPUCTL_SOCKET)";
}

// Field 22 of <proc_dir>/stat (clock ticks after boot, after the command
// name in parentheses) plus "btime" of <proc_root>/stat.
std::optional<absl::Time> StartTime(const std::string& proc_root, const std::string& proc_dir) {
  const ProcRead stat = ReadProcFile(proc_dir + "/stat");
  const ProcRead system = ReadProcFile(proc_root + "/stat");
  if (!stat.ok || !system.ok) return std::nullopt;
  const size_t paren = stat.text.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  // After ")": field 3 (state) onwards; the start time is field 22.
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat.text).substr(paren + 1), ' ', absl::SkipEmpty());
  uint64_t ticks = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks)) return std::nullopt;
  int64_t boot = 0;
  for (absl::string_view line : absl::StrSplit(system.text, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtoi(line, &boot)) {
      const int64_t hz = sysconf(_SC_CLK_TCK);
      if (hz <= 0) return std::nullopt;
      const auto whole = static_cast<int64_t>(ticks / static_cast<uint64_t>(hz));
      const auto rest = static_cast<int64_t>(ticks % static_cast<uint64_t>(hz));
      return absl::FromUnixSeconds(boot) + absl::Seconds(whole) +
             absl::Nanoseconds(rest * 1000000000 / hz);
    }
  }
  return std::nullopt;
}

}  // namespace

bool RefusalMayBeOf(const ProcessFacts& process, absl::Time time) {
  // btime and the tick count are whole seconds and ticks: a second of slack.
  return !process.started_at.has_value() || time >= *process.started_at - absl::Seconds(1);
}

const std::vector<std::string>& DoctorEnvironmentNames() {
  static const std::vector<std::string>* const names = new std::vector<std::string>{
      "GPUCTL_SOCKET",
      "LD_PRELOAD",
      "CUDA_INJECTION64_PATH",
      "GPUCTL_LIBRARY",
      "GPUCTL_DISABLE",
      "GPUCTL_QUIET",
      "GPUCTL_DEBUG",
      "GPUCTL_ATTACH_DELAY_MS",
      "GPUCTL_JOB_ID",
      "SLURM_JOB_ID",
      "TORCHELASTIC_RUN_ID",
      "RANK",
      "LOCAL_RANK",
      "WORLD_SIZE",
      "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_LOCAL_RANK",
      "OMPI_COMM_WORLD_SIZE",
      "PMI_RANK",
      "PMI_SIZE",
      "SLURM_PROCID",
      "SLURM_LOCALID",
      "SLURM_NTASKS",
  };
  return *names;
}

ProcessFacts InspectProcess(int pid, const std::string& proc_root) {
  ProcessFacts facts;
  facts.pid = pid;
  facts.proc_dir = absl::StrCat(proc_root, "/", pid);
  facts.status = ReadProcFile(facts.proc_dir + "/status");
  if (facts.status.ok) {
    facts.exists = true;
    ParseStatus(facts);
  } else {
    struct stat st {};
    facts.exists = stat(facts.proc_dir.c_str(), &st) == 0;
    if (!facts.exists) return facts;
  }
  facts.maps = ReadProcFile(facts.proc_dir + "/maps");
  if (facts.maps.ok) {
    for (absl::string_view line : absl::StrSplit(facts.maps.text, '\n')) {
      absl::string_view path = MappedPath(line);
      absl::ConsumeSuffix(&path, " (deleted)");
      if (!path.empty() && IsLibgpuctl(path)) {
        facts.library_path = std::string(path);
        break;
      }
    }
  }
  facts.environ = ReadProcFile(facts.proc_dir + "/environ");
  if (facts.environ.ok) {
    const std::vector<std::string>& names = DoctorEnvironmentNames();
    for (absl::string_view entry : absl::StrSplit(facts.environ.text, '\0', absl::SkipEmpty())) {
      const size_t eq = entry.find('=');
      if (eq == absl::string_view::npos) continue;
      const std::string name(entry.substr(0, eq));
      if (std::find(names.begin(), names.end(), name) == names.end()) continue;
      // The first definition is the one getenv() returns.
      facts.environment.emplace(name, std::string(entry.substr(eq + 1, kMaxValueChars)));
    }
  }
  facts.started_at = StartTime(proc_root, facts.proc_dir);
  std::string cwd(4096, '\0');
  const ssize_t n = readlink((facts.proc_dir + "/cwd").c_str(), cwd.data(), cwd.size());
  if (n > 0 && static_cast<size_t>(n) < cwd.size()) facts.cwd = cwd.substr(0, n);
  return facts;
}

std::string SocketPathOf(const ProcessFacts& process) {
  std::string socket = EnvValue(process, "GPUCTL_SOCKET");
  if (socket.empty()) return kDefaultLibrarySocket;
  if (socket[0] == '/' || process.cwd.empty()) return socket;
  return NormalizePath(absl::StrCat(process.cwd, "/", socket));
}

bool CredentialsPermit(const ProcessCredentials& creds, uid_t owner, gid_t group, uint32_t mode,
                       int access, bool is_directory) {
  if ((creds.cap_effective & kCapDacOverride) != 0) return true;
  if (is_directory && access == X_OK && (creds.cap_effective & kCapDacReadSearch) != 0) {
    return true;
  }
  uint32_t bits = mode & 07;
  if (creds.uid == owner) {
    bits = (mode >> 6) & 07;
  } else if (InGroups(creds, group)) {
    bits = (mode >> 3) & 07;
  }
  const uint32_t want = access == W_OK ? 02 : access == X_OK ? 01 : 04;
  return (bits & want) != 0;
}

SocketFacts InspectSocket(const std::string& path, const std::optional<ProcessCredentials>& creds) {
  SocketFacts facts;
  facts.path = path;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    facts.stat_error = errno;
  } else {
    facts.exists = true;
    facts.is_socket = S_ISSOCK(st.st_mode);
    facts.mode = st.st_mode & 07777;
    facts.owner = st.st_uid;
    facts.group = st.st_gid;
    facts.device = st.st_dev;
    facts.inode = st.st_ino;
    if (creds.has_value()) {
      facts.process_may_write =
          CredentialsPermit(*creds, st.st_uid, st.st_gid, facts.mode, W_OK, false);
    }
  }
  if (creds.has_value()) {
    // Every directory the kernel walks to the socket, the root first.
    const size_t last_slash = path.rfind('/');
    const std::string dir = last_slash == std::string::npos ? "." : path.substr(0, last_slash);
    std::vector<std::string> walked;
    std::string prefix = absl::StartsWith(path, "/") ? "/" : "";
    if (!prefix.empty()) walked.push_back("/");
    for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
      prefix = absl::StrCat(prefix, prefix.empty() || prefix == "/" ? "" : "/", part);
      walked.push_back(prefix);
    }
    for (const std::string& d : walked) {
      struct stat ds {};
      if (stat(d.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode)) break;
      if (!CredentialsPermit(*creds, ds.st_uid, ds.st_gid, ds.st_mode & 07777, X_OK, true)) {
        facts.blocked_directory = d;
        facts.blocked_mode = ds.st_mode & 07777;
        facts.blocked_owner = ds.st_uid;
        facts.blocked_group = ds.st_gid;
        break;
      }
    }
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    facts.tried_connect = true;
    facts.connect_error = ENAMETOOLONG;
    return facts;
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return facts;
  facts.tried_connect = true;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API.
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 || errno == EAGAIN ||
      errno == EINPROGRESS) {
    // EAGAIN: the backlog is full, but a daemon listens.
    facts.listening = true;
  } else {
    facts.connect_error = errno;
  }
  close(fd);
  return facts;
}

bool SameSocket(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  if (stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  return NormalizePath(a) == NormalizePath(b);
}

const char* DoctorCauseName(DoctorCause cause) {
  switch (cause) {
    case DoctorCause::kAttached:
      return "attached";
    case DoctorCause::kNoProcess:
      return "no_process";
    case DoctorCause::kZombie:
      return "zombie";
    case DoctorCause::kRefused:
      return "refused";
    case DoctorCause::kDisabled:
      return "disabled";
    case DoctorCause::kNoLibrary:
      return "no_library";
    case DoctorCause::kSocketMismatch:
      return "socket_mismatch";
    case DoctorCause::kNoSocket:
      return "no_socket";
    case DoctorCause::kNotASocket:
      return "not_a_socket";
    case DoctorCause::kDirectoryDenied:
      return "directory_denied";
    case DoctorCause::kSocketDenied:
      return "socket_denied";
    case DoctorCause::kNotListening:
      return "not_listening";
    case DoctorCause::kDaemonUnreachable:
      return "daemon_unreachable";
    case DoctorCause::kUninspectable:
      return "uninspectable";
    case DoctorCause::kUnknown:
      return "unknown";
  }
  return "unknown";
}

Diagnosis Diagnose(const ProcessFacts& p, const std::optional<SocketFacts>& socket,
                   const DaemonFacts& daemon, const DiagnoseOptions& options) {
  Diagnosis d;
  const std::string pid = absl::StrCat("pid ", p.pid);
  const std::string& proc = p.proc_dir;

  // The process.
  if (!p.exists) {
    Add(d, "process", false, absl::StrCat("no process ", p.pid, " on this host (", proc, ")"));
  } else if (!p.status.ok) {
    Add(d, "process", false, UnreadableText(proc + "/status", p.status, p));
  } else {
    Add(d, "process", !p.zombie,
        absl::StrCat(pid, " (", Printable(p.name), ")", p.zombie ? " is a zombie" : "", " runs as ",
                     UidText(p.creds.uid), ", gid ", p.creds.gid, ", groups ",
                     p.creds.groups.empty() ? "-" : absl::StrJoin(p.creds.groups, ",")));
  }

  // The library.
  if (p.exists) {
    if (!p.maps.ok) {
      Add(d, "library", false, UnreadableText(proc + "/maps", p.maps, p));
    } else if (p.library_path.has_value()) {
      Add(d, "library", true, absl::StrCat("libgpuctl is loaded: ", Printable(*p.library_path)));
    } else {
      Add(d, "library", false, absl::StrCat("no libgpuctl in ", proc, "/maps"));
    }
  }

  // The environment it was started with.
  if (p.exists) {
    if (!p.environ.ok) {
      Add(d, "environment", false, UnreadableText(proc + "/environ", p.environ, p));
    } else if (p.environment.empty()) {
      Add(d, "environment", true,
          "started without GPUCTL_SOCKET, LD_PRELOAD, CUDA_INJECTION64_PATH and job or rank "
          "variables");
    } else {
      for (const std::string& name : DoctorEnvironmentNames()) {
        auto it = p.environment.find(name);
        if (it == p.environment.end()) continue;
        const bool ok = !(name == "GPUCTL_DISABLE" && it->second == "1");
        Add(d, "environment", ok, absl::StrCat(name, "=", Printable(it->second)));
      }
    }
  }

  // The socket, against the process's credentials.
  const std::string gpuctl_socket = EnvValue(p, "GPUCTL_SOCKET");
  const std::string socket_origin = !gpuctl_socket.empty() ? "its GPUCTL_SOCKET"
                                    : p.environ.ok
                                        ? "the library's default"
                                        : "the library's default; its environment is unknown";
  if (socket.has_value()) {
    const SocketFacts& s = *socket;
    const std::string where = absl::StrCat("socket ", Printable(s.path), " (", socket_origin, ")");
    if (!s.exists) {
      Add(d, "socket", false, absl::StrCat(where, ": ", std::strerror(s.stat_error)));
    } else if (!s.is_socket) {
      Add(d, "socket", false, absl::StrCat(where, " is not a socket"));
    } else {
      Add(d, "socket", true, absl::StrCat(where, ": mode ", ModeText(s.mode, s.owner, s.group)));
    }
    if (p.status.ok && !s.blocked_directory.empty()) {
      Add(d, "socket", false,
          absl::StrCat(UidText(p.creds.uid), " may not search ", Printable(s.blocked_directory),
                       " (mode ", ModeText(s.blocked_mode, s.blocked_owner, s.blocked_group), ")"));
    } else if (p.status.ok && s.exists && s.is_socket) {
      Add(d, "socket", s.process_may_write,
          absl::StrCat(UidText(p.creds.uid), s.process_may_write ? " may" : " may not",
                       " connect to it"));
    }
    if (s.exists && s.is_socket && s.tried_connect) {
      if (s.listening) {
        Add(d, "socket", true, "a daemon listens on it");
      } else if (s.connect_error == EACCES || s.connect_error == EPERM) {
        Add(d, "socket", true,
            "gpuctl's own user may not connect to it to check for a daemon (run as root)");
      } else {
        Add(d, "socket", false,
            absl::StrCat("nothing listens on it: ", std::strerror(s.connect_error)));
      }
    }
  }

  // The daemon.
  const bool daemon_socket_known = !daemon.socket_path.empty();
  const bool mismatch =
      socket.has_value() && daemon_socket_known && !SameSocket(socket->path, daemon.socket_path);
  if (!daemon.reached) {
    Add(d, "daemon", false,
        absl::StrCat("gpuctld at ", daemon.target, " not reachable: ", daemon.error));
  } else {
    Add(d, "daemon", true,
        absl::StrCat("gpuctld at ", daemon.target, " (host ", Printable(daemon.host), ")",
                     daemon_socket_known
                         ? absl::StrCat(" listens on ", Printable(daemon.socket_path))
                         : " does not say its socket"));
    if (daemon.attached.has_value()) {
      Add(d, "daemon", true,
          absl::StrCat("gpuctld lists ", pid, " as attached (", JobAndRank(*daemon.attached), ")"));
    } else {
      Add(d, "daemon", false, absl::StrCat("gpuctld does not list ", pid, " as attached"));
    }
    for (const v1::RejectedAttachment& r : daemon.refusals) {
      Add(d, "daemon", false,
          absl::StrCat("gpuctld refused ", pid, " (uid ", r.uid(), "): ", Printable(r.reason()),
                       r.repeats() > 0 ? absl::StrCat(" (", r.repeats() + 1, " times)") : ""));
    }
    if (!daemon.uid_refusals.empty()) {
      const v1::RejectedAttachment& r = daemon.uid_refusals.front();
      Add(d, "daemon", false,
          absl::StrCat("gpuctld refused ", daemon.uid_refusals.size(), " other process(es) of uid ",
                       r.uid(), " lately, the last one: ", Printable(r.reason())));
    }
  }
  if (mismatch && !daemon.reached) {
    Add(d, "socket", false,
        absl::StrCat("the daemon's socket (--socket) is ", Printable(daemon.socket_path)));
  }

  // The verdict: the first real cause.
  if (daemon.attached.has_value()) {
    Conclude(d, DoctorCause::kAttached,
             absl::StrCat(pid, " is attached to gpuctld on ", Printable(daemon.host), " (",
                          JobAndRank(*daemon.attached), ")"),
             "");
    return d;
  }
  if (!p.exists) {
    Conclude(d, DoctorCause::kNoProcess, absl::StrCat("no process ", p.pid, " on this host"),
             "run doctor on the host of the process, with the pid as that host sees it");
    return d;
  }
  if (p.zombie) {
    Conclude(d, DoctorCause::kZombie, absl::StrCat(pid, " has exited (a zombie)"),
             "nothing to attach: its parent has not reaped it yet");
    return d;
  }
  if (!daemon.refusals.empty()) {
    const v1::RejectedAttachment& r = daemon.refusals.front();
    std::string fix = "see the reason; gpuctl ps --all lists the daemon's refusals";
    if (absl::StrContains(r.reason(), "allowed_uids")) {
      fix = absl::StrCat("add uid ", r.uid(),
                         " to ipc.allowed_uids in gpuctld's configuration, or run the process "
                         "as an allowed uid");
    } else if (absl::StrContains(r.reason(), "protocol")) {
      fix = "use a libgpuctl of the daemon's version (gpuctl status shows it)";
    }
    Conclude(d, DoctorCause::kRefused,
             absl::StrCat("the daemon refused it: ", Printable(r.reason())), fix);
    return d;
  }
  if (EnvValue(p, "GPUCTL_DISABLE") == "1") {
    Conclude(d, DoctorCause::kDisabled,
             absl::StrCat(pid, " was started with GPUCTL_DISABLE=1: the library stays off"),
             "start it without GPUCTL_DISABLE");
    return d;
  }
  if (p.maps.ok && !p.library_path.has_value()) {
    const std::vector<std::string> preloaded = PreloadedLibraries(p);
    if (!preloaded.empty()) {
      struct stat st {};
      const std::string& lib = preloaded.front();
      const bool lib_exists = stat(lib.c_str(), &st) == 0;
      Conclude(d, DoctorCause::kNoLibrary,
               absl::StrCat(pid, " has no gpuctl library loaded although LD_PRELOAD names ",
                            Printable(lib),
                            lib_exists ? " (the loader refused it: a setuid program, another "
                                         "architecture, or a library that does not load)"
                                       : ", which does not exist"),
               absl::StrCat("start it with LD_PRELOAD=", options.library_hint));
      return d;
    }
    if (EnvSet(p, "CUDA_INJECTION64_PATH") && IsLibgpuctl(EnvValue(p, "CUDA_INJECTION64_PATH"))) {
      Conclude(d, DoctorCause::kNoLibrary,
               absl::StrCat(pid,
                            " has no gpuctl library loaded yet: CUDA_INJECTION64_PATH loads it "
                            "when the process initializes CUDA, which it has not"),
               absl::StrCat("wait for its first CUDA call, or start it with LD_PRELOAD=",
                            options.library_hint));
      return d;
    }
    Conclude(d, DoctorCause::kNoLibrary, absl::StrCat(pid, " has no gpuctl library loaded"),
             absl::StrCat("start it with LD_PRELOAD=", options.library_hint,
                          ", or import gpuctl with GPUCTL_LIBRARY=", options.library_hint));
    return d;
  }
  if (!p.maps.ok || !p.environ.ok) {
    const ProcRead& unread = !p.maps.ok ? p.maps : p.environ;
    Conclude(d, DoctorCause::kUninspectable,
             absl::StrCat("cannot tell why ", pid, " is not attached: ",
                          UnreadableText(proc + (!p.maps.ok ? "/maps" : "/environ"), unread, p)),
             absl::StrCat("run gpuctl doctor as root or as uid ", p.creds.uid));
    return d;
  }
  if (mismatch) {
    const std::string used = gpuctl_socket.empty()
                                 ? absl::StrCat("the default socket ", kDefaultLibrarySocket)
                                 : absl::StrCat("GPUCTL_SOCKET=", Printable(gpuctl_socket));
    const bool other_daemon = socket->exists && socket->listening;
    Conclude(d, DoctorCause::kSocketMismatch,
             absl::StrCat("the process uses ", used, " but the daemon",
                          daemon.reached ? absl::StrCat(" at ", daemon.target) : "", " listens on ",
                          Printable(daemon.socket_path),
                          other_daemon ? " (another daemon listens on the process's socket)" : ""),
             absl::StrCat("start it with GPUCTL_SOCKET=", Printable(daemon.socket_path)));
    return d;
  }
  if (socket.has_value()) {
    const SocketFacts& s = *socket;
    const std::string path = Printable(s.path);
    if (!s.exists) {
      Conclude(d, DoctorCause::kNoSocket,
               absl::StrCat("no daemon listens on ", path, " (", std::strerror(s.stat_error), ")"),
               absl::StrCat("start gpuctld --socket ", path,
                            ", or start the process with GPUCTL_SOCKET set to the daemon's "
                            "socket (gpuctl status shows it)"));
      return d;
    }
    if (!s.is_socket) {
      Conclude(d, DoctorCause::kNotASocket, absl::StrCat(path, " is not a socket"),
               "start the process with GPUCTL_SOCKET set to the daemon's socket (gpuctl status "
               "shows it)");
      return d;
    }
    if (!s.blocked_directory.empty()) {
      Conclude(d, DoctorCause::kDirectoryDenied,
               absl::StrCat("the directory ", Printable(s.blocked_directory), " refuses ",
                            UidText(p.creds.uid), " (mode ",
                            ModeText(s.blocked_mode, s.blocked_owner, s.blocked_group), ")"),
               AccessFix(p.creds, s.blocked_owner, s.blocked_group, s.blocked_mode, 01, false));
      return d;
    }
    if (!s.process_may_write) {
      Conclude(d, DoctorCause::kSocketDenied,
               absl::StrCat("the socket ", path, " refuses ", UidText(p.creds.uid), " (mode ",
                            ModeText(s.mode, s.owner, s.group), ")"),
               AccessFix(p.creds, s.owner, s.group, s.mode, 02, true));
      return d;
    }
    if (s.tried_connect && !s.listening && s.connect_error != EACCES && s.connect_error != EPERM) {
      Conclude(
          d, DoctorCause::kNotListening,
          absl::StrCat("no daemon listens on ", path, " (", std::strerror(s.connect_error), ")"),
          "start gpuctld: the socket file is left from one that stopped");
      return d;
    }
  }
  if (!daemon.reached) {
    Conclude(d, DoctorCause::kDaemonUnreachable,
             absl::StrCat("the process looks ready to attach, but gpuctld at ", daemon.target,
                          " cannot be asked about it: ", daemon.error),
             "pass --host with the daemon's gRPC address");
    return d;
  }
  Conclude(d, DoctorCause::kUnknown,
           absl::StrCat(pid,
                        " has the library and may reach the socket, but gpuctld does not list "
                        "it: it may be attaching right now (the library waits "
                        "GPUCTL_ATTACH_DELAY_MS, 500 ms by default, after the process starts)"),
           "run doctor again; if it stays detached, start the process with GPUCTL_DEBUG=1 to "
           "log every attach step on its stderr");
  return d;
}

}  // namespace gpuctl::cli
