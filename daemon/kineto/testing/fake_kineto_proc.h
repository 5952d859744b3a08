#ifndef GPUCTL_DAEMON_KINETO_TESTING_FAKE_KINETO_PROC_H_
#define GPUCTL_DAEMON_KINETO_TESTING_FAKE_KINETO_PROC_H_

// Test-only: a /proc for the kineto bridge in a temporary directory. Each
// process gets <root>/<pid>/stat (its parent and start time), status
// (NSpid, Uid), environ, cmdline and root/ (a plain directory standing in
// for its filesystem, with tmp/ in it), so that the bridge's reader and
// the worker's pickup read real files.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuctl::daemon::kineto::testing {

class FakeKinetoProc {
 public:
  explicit FakeKinetoProc(std::string root) : root_(std::move(root)) {
    std::filesystem::create_directories(root_);
  }
  const std::string& root() const { return root_; }

  struct Process {
    int pid = 0;
    int ppid = 1;
    uint64_t start_time = 1000;
    int own_pid = 0;  // 0: the same as pid
    uid_t uid = getuid();
    std::map<std::string, std::string> env;
    std::vector<std::string> cmdline = {"python", "train.py"};
  };

  void Add(const Process& p) {
    const std::string dir = absl::StrCat(root_, "/", p.pid);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir + "/root/tmp");
    // pid (comm) state ppid, then fields 5..21 and starttime (22).
    std::string stat = absl::StrCat(p.pid, " (py thon) S ", p.ppid);
    for (int field = 5; field <= 21; ++field) absl::StrAppend(&stat, " 0");
    absl::StrAppend(&stat, " ", p.start_time, " 0 0\n");
    Write(dir + "/stat", stat);
    const int own = p.own_pid == 0 ? p.pid : p.own_pid;
    std::string nspid = own == p.pid ? absl::StrCat(p.pid) : absl::StrCat(p.pid, "\t", own);
    Write(dir + "/status", absl::StrCat("Name:\tpython\nUid:\t", p.uid, "\t", p.uid, "\t", p.uid,
                                        "\t", p.uid, "\nNSpid:\t", nspid, "\n"));
    std::string environ;
    for (const auto& [k, v] : p.env) absl::StrAppend(&environ, k, "=", v, std::string(1, '\0'));
    Write(dir + "/environ", environ);
    Write(dir + "/cmdline", absl::StrJoin(p.cmdline, std::string(1, '\0')) + std::string(1, '\0'));
  }
  void Remove(int pid) { std::filesystem::remove_all(absl::StrCat(root_, "/", pid)); }
  // The process's /tmp as the daemon sees it.
  std::string Tmp(int pid) const { return absl::StrCat(root_, "/", pid, "/root/tmp"); }

  static void Write(const std::string& path, const std::string& content) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  }

 private:
  std::string root_;
};

}  // namespace gpuctl::daemon::kineto::testing

#endif  // GPUCTL_DAEMON_KINETO_TESTING_FAKE_KINETO_PROC_H_
