#ifndef GPUCTL_CLI_DOCTOR_INSPECT_H_
#define GPUCTL_CLI_DOCTOR_INSPECT_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gpuctl/v1/service.pb.h"

// What `gpuctl doctor` finds out about one process on this host: its
// credentials, whether libgpuctl is mapped into it, the environment it was
// started with (only the variables the library reads), the IPC socket it
// would use against those credentials, and what gpuctld says about it; and
// the one verdict drawn from all of that. Everything here is local and
// synchronous; the gRPC calls are in cli/doctor_command.cc.
namespace gpuctl::cli {

// The library's socket when GPUCTL_SOCKET is unset (AgentOptions in
// client_lib/src/agent.h; gpuctld's default in daemon/ipc/ipc_server.h).
inline constexpr char kDefaultLibrarySocket[] = "/run/gpuctl/gpuctl.sock";

// The only variables of the process's environment doctor reads or prints:
// what libgpuctl reads to attach and to name the job and rank
// (client_lib/src/runtime.cc, process_identity.cc, api.cc), and what loads it.
const std::vector<std::string>& DoctorEnvironmentNames();

// One /proc file as read: its text, or why it could not be read.
struct ProcRead {
  bool ok = false;
  int error = 0;  // errno when !ok
  std::string text;
};

// The credentials the kernel checks a connect() against: the filesystem
// uid and gid, the supplementary groups and the effective capabilities.
struct ProcessCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  uint64_t cap_effective = 0;
};

struct ProcessFacts {
  int pid = 0;
  std::string proc_dir;  // <proc_root>/<pid>
  bool exists = false;
  bool zombie = false;
  std::string name;  // "Name:" of /proc/<pid>/status
  // /proc/<pid>/status parsed: exists and credentials are only known when ok.
  ProcRead status;
  ProcessCredentials creds;
  // /proc/<pid>/maps read; the first mapped file named libgpuctl*.
  ProcRead maps;
  std::optional<std::string> library_path;
  // /proc/<pid>/environ read; only DoctorEnvironmentNames() are kept.
  ProcRead environ;
  std::map<std::string, std::string> environment;
  // The process's working directory (for a relative GPUCTL_SOCKET); empty
  // when unreadable.
  std::string cwd;
  // When it started (/proc/<pid>/stat's start time after /proc/stat's boot
  // time, to the second); unset when unknown.
  std::optional<absl::Time> started_at;
};

// Reads <proc_root>/<pid>/{status,maps,environ,cwd,stat} and <proc_root>/stat. Never fails: what
// could not be read says why in its ProcRead. `proc_root` is "/proc"
// outside tests.
ProcessFacts InspectProcess(int pid, const std::string& proc_root);

// The socket the process would connect to: its GPUCTL_SOCKET (made absolute
// against its working directory) or the library's default.
std::string SocketPathOf(const ProcessFacts& process);

// Whether `creds` may search (X_OK) or write (W_OK) a file of this owner,
// group and mode, as the kernel decides without ACLs: owner, else group,
// else other bits; CAP_DAC_OVERRIDE passes (CAP_DAC_READ_SEARCH for a
// directory search).
bool CredentialsPermit(const ProcessCredentials& creds, uid_t owner, gid_t group, uint32_t mode,
                       int access, bool is_directory);

struct SocketFacts {
  std::string path;
  bool exists = false;
  int stat_error = 0;  // errno of stat() when !exists
  bool is_socket = false;
  uint32_t mode = 0;  // permission bits
  uid_t owner = 0;
  gid_t group = 0;
  dev_t device = 0;
  ino_t inode = 0;
  // The first directory on the path the process may not search; empty when
  // every one may be searched. Its mode, owner and group follow.
  std::string blocked_directory;
  uint32_t blocked_mode = 0;
  uid_t blocked_owner = 0;
  gid_t blocked_group = 0;
  // Write permission on the socket file for the process's credentials.
  bool process_may_write = false;
  // A connect() by this program (not the process): listening, or the errno.
  bool tried_connect = false;
  bool listening = false;
  int connect_error = 0;
};

// stat()s the socket and its directories against `creds` (when known) and
// tries to connect once (SOCK_SEQPACKET, closed at once without a Hello).
SocketFacts InspectSocket(const std::string& path, const std::optional<ProcessCredentials>& creds);

// What gpuctld said, by GetStatus and ListProcesses(include_rejected).
struct DaemonFacts {
  std::string target;
  bool reached = false;
  std::string error;        // why not, when !reached
  std::string host;         // the daemon's host name
  std::string socket_path;  // --socket, else GetStatus's
  bool socket_from_flag = false;
  std::optional<v1::ProcessInfo> attached;
  // Refusals of this pid, newest first; of other pids of the same uid.
  std::vector<v1::RejectedAttachment> refusals;
  std::vector<v1::RejectedAttachment> uid_refusals;
};

struct DoctorFinding {
  std::string check;  // "process", "library", "environment", "socket", "daemon"
  bool ok = true;
  std::string text;
};

// Machine-readable causes, in the order Diagnose looks for them.
enum class DoctorCause {
  kAttached,
  kNoProcess,
  kZombie,
  kRefused,
  kDisabled,
  kNoLibrary,
  kSocketMismatch,
  kNoSocket,
  kNotASocket,
  kDirectoryDenied,
  kSocketDenied,
  kNotListening,
  kDaemonUnreachable,
  kUninspectable,
  kUnknown,
};

// "attached", "no_library", ... (the --json "cause").
const char* DoctorCauseName(DoctorCause cause);

struct Diagnosis {
  std::vector<DoctorFinding> findings;
  DoctorCause cause = DoctorCause::kUnknown;
  std::string verdict;
  std::string fix;  // empty when there is nothing to fix
  int exit_code = 0;
};

struct DiagnoseOptions {
  // Shown in the fix for a process without the library.
  std::string library_hint = "libgpuctl.so";
};

// The findings, then the first real cause in the order of DoctorCause.
// `socket` is unset when the process was not inspected far enough to know.
Diagnosis Diagnose(const ProcessFacts& process, const std::optional<SocketFacts>& socket,
                   const DaemonFacts& daemon, const DiagnoseOptions& options);

// Whether a refusal the daemon recorded at `time` can be of this process and
// not of an earlier one that had its pid: not before it started.
bool RefusalMayBeOf(const ProcessFacts& process, absl::Time time);

// Whether two socket paths name the same file (same device and inode when
// both exist here; the same normalized path otherwise).
bool SameSocket(const std::string& a, const std::string& b);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_DOCTOR_INSPECT_H_
