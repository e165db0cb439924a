#pragma once
// Namespace hosts for the tests that run ranks on them (netns_hosts_test.cpp, netns_bench_test.cpp):
// made at a test's start and removed at its end (scripts/netns-hosts), one such test at a time
// (an advisory lock on the file tests/cli/ddp_hosts_test.py takes too), whether they can be made
// here, and the options that send mpirun through them.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <string>

#include "tests/cli/cli_test_util.h"

namespace ts::testing {

inline const std::string kNetnsScripts = std::string(TS_SOURCE_DIR) + "/scripts/";

// `run --hosts tsh1:..,tsh2:..` through the hosts: scripts/netns-rsh starts Open MPI's daemons in
// them, and both of its TCP channels stay on the hosts' network.
inline const std::string kOverHosts = " --mca plm_rsh_agent=" + kNetnsScripts +
                                      "netns-rsh --mca oob_tcp_if_include=10.99.0.0/24 "
                                      "--mca btl_tcp_if_include=10.99.0.0/24";

// The hosts for one test (`scripts/netns-hosts up ARGS`, e.g. "2" or "2 --rate 1gbit").
class NetnsHosts {
 public:
  explicit NetnsHosts(const std::string& args) { made_ = run_command(kNetnsScripts + "netns-hosts up " + args); }
  ~NetnsHosts() {
    if (made_.exit_code == 0) run_command(kNetnsScripts + "netns-hosts down");
  }
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;
  const CommandResult& made() const { return made_; }

 private:
  CommandResult made_;
};

// ctest may run these tests side by side, and the second would find the first's hosts (or lose
// them midway): an advisory lock on a file, held for the test's whole life.
class OneNetnsTestAtATime {
 public:
  OneNetnsTestAtATime() : fd_(::open("/tmp/trainscope-netns-hosts.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~OneNetnsTestAtATime() {
    if (fd_ >= 0) ::close(fd_);
  }
  OneNetnsTestAtATime(const OneNetnsTestAtATime&) = delete;
  OneNetnsTestAtATime& operator=(const OneNetnsTestAtATime&) = delete;

 private:
  int fd_;
};

// Empty when namespace hosts can be made for a test, else why not.
inline std::string why_no_netns_hosts() {
  const auto check = run_command(kNetnsScripts + "netns-hosts check");
  if (check.exit_code == 2) return "network namespaces cannot be made here: " + check.out;
  if (check.exit_code != 0) return "netns-hosts check failed: " + check.out;
  if (!run_command(kNetnsScripts + "netns-hosts status | grep -q '^tsh'").exit_code) {
    return "netns hosts already exist (someone's experiment): not touching them; `scripts/netns-hosts down` frees "
           "them for this test";
  }
  return "";
}

}  // namespace ts::testing
