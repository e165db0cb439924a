// Launch planning: hosts, hostfiles, slots, and the mpirun command they make. Resolvable hosts
// are given as addresses: a fresh machine may have no /etc/hosts entry for localhost.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "dist/launch.h"
#include "tests/support/files.h"

namespace ts::dist {
namespace {

bool has(const std::vector<std::string>& argv, std::initializer_list<std::string> seq) {
  return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
}

TEST(Launch, ParsesHostsWithSlots) {
  const auto h = parse_hosts("a:2,b,c.example:3");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].host, "a");
  EXPECT_EQ(h[0].slots, 2);
  EXPECT_EQ(h[1].slots, 1);
  EXPECT_EQ(h[2].host, "c.example");
  EXPECT_EQ(h[2].slots, 3);
  for (const char* bad : {"", "a:0", "a:x", "a:2,,b", "a,a", "a b", "a:-1", "a:99999"}) {
    EXPECT_THROW(parse_hosts(bad), std::invalid_argument) << bad;
  }
}

TEST(Launch, ReadsHostfilesInOpenMpiForm) {
  ts::testing::ScratchDir dir("launch");
  const auto path = dir.path() / "hosts";
  std::ofstream(path) << "# two hosts\nn1 slots=2\nn2:3   # comment\n\nn3\n";
  const auto h = read_hostfile(path);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].slots, 2);
  EXPECT_EQ(h[1].slots, 3);
  EXPECT_EQ(h[2].slots, 1);
  std::ofstream(path) << "n1 cores=2\n";
  EXPECT_THROW(read_hostfile(path), std::invalid_argument);
  std::ofstream(path) << "# nothing\n";
  EXPECT_THROW(read_hostfile(path), std::invalid_argument);
  EXPECT_THROW(read_hostfile(dir.path() / "missing"), std::invalid_argument);
}

TEST(Launch, UnknownHostsAreNamed) {
  EXPECT_NO_THROW(check_hosts_resolve({{"127.0.0.1", 1}}));
  try {
    check_hosts_resolve({{"127.0.0.1", 1}, {"no-such-host.invalid", 1}});
    FAIL() << "resolved an .invalid name";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-host.invalid"), std::string::npos);
  }
}

TEST(Launch, PlansLocalAndMultiHostCommands) {
  // mpirun is a dependency (scripts/setup installs openmpi-bin): its absence is a failure here.
  ASSERT_NO_THROW((void)find_mpirun());
  LaunchRequest r;
  r.nproc = 3;
  r.executable = "/bin/trainscope";
  r.rank_args = {"run", "resnet50"};
  auto p = plan_launch(r);
  EXPECT_EQ(p.nproc, 3);
  EXPECT_EQ(p.ranks_per_host, 3);
  EXPECT_TRUE(has(p.argv, {"-np", "3"}));
  EXPECT_TRUE(has(p.argv, {"--bind-to", "none"}));
  EXPECT_TRUE(has(p.argv, {"--oversubscribe"}));
  EXPECT_TRUE(has(p.argv, {"/bin/trainscope", "run", "resnet50"}));

  r.nproc = 0;
  r.hosts = {{"h1", 2}, {"h2", 2}};
  r.rsh_agent = "/x/netns-rsh";
  r.network = "10.99.0.0/24";
  p = plan_launch(r);
  EXPECT_EQ(p.nproc, 4);
  EXPECT_EQ(p.ranks_per_host, 2);
  EXPECT_TRUE(has(p.argv, {"--host", "h1:2,h2:2"}));
  EXPECT_TRUE(has(p.argv, {"--mca", "plm_rsh_agent", "/x/netns-rsh"}));
  EXPECT_TRUE(has(p.argv, {"--mca", "btl_tcp_if_include", "10.99.0.0/24"}));
  r.nproc = 3;
  EXPECT_EQ(plan_launch(r).ranks_per_host, 2);
  r.nproc = 5;
  EXPECT_THROW(plan_launch(r), std::invalid_argument);   // more ranks than slots
}

TEST(Launch, MissingMpirunIsABadInputError) {
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", "/nonexistent", 1);
  EXPECT_THROW(find_mpirun(), std::invalid_argument);
  ::setenv("PATH", saved.c_str(), 1);
}

}  // namespace
}  // namespace ts::dist
