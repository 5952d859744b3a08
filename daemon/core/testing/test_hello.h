#ifndef GPUCTL_DAEMON_CORE_TESTING_TEST_HELLO_H_
#define GPUCTL_DAEMON_CORE_TESTING_TEST_HELLO_H_

#include <string>

#include "daemon/core/peer_channel.h"
#include "gpuctl/v1/ipc.pb.h"

namespace gpuctl::testing {

// A valid Hello from `pid` of job `job`, rank 0 of 2.
inline v1::ipc::Hello MakeHello(int pid, const std::string& job) {
  v1::ipc::Hello h;
  h.set_protocol_major(1);
  h.set_pid(pid);
  h.set_job_id(job);
  h.set_rank(0);
  h.set_local_rank(0);
  h.set_world_size(2);
  h.set_hostname("node1");
  h.set_library_version("0.1.0");
  h.add_cmdline("python");
  return h;
}

// The kernel's credentials of `pid`, uid and gid 1000.
inline daemon::PeerCredentials Creds(int pid) { return {pid, 1000, 1000}; }

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_CORE_TESTING_TEST_HELLO_H_
