// The parameter-server options of `trainscope run` and of suites (--strategy ps, --servers,
// --dedicated-servers, --server-hosts, --ps-mode, --staleness, --chunk-mb): bad input exits 2
// with a message naming the option and the value, and writes nothing; good input reaches the
// ranks' arguments and the mpirun command (seen through a stand-in mpirun, TS_MPIRUN, that
// records its arguments and starts nothing). No parameter-server training is run here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "session/run_options.h"

using namespace ts::testing;

namespace {

struct Refused {
  std::string args;  // after `run`
  std::string says;  // part of the message
};

// Each `run ARGS --db DIR/sub/t.db` exits 2, says why, and creates neither the db nor its directory.
void expect_refused(const std::vector<Refused>& cases) {
  for (const auto& c : cases) {
    TempDir dir;
    const auto db = dir / "sub" / "t.db";
    const auto res = run_trainscope("run " + c.args + " --db " + db.string());
    EXPECT_EQ(res.exit_code, 2) << c.args << "\n" << res.out;
    EXPECT_NE(res.out.find(c.says), std::string::npos) << c.args << ": expected '" << c.says << "' in\n" << res.out;
    EXPECT_FALSE(std::filesystem::exists(dir / "sub")) << c.args << ": a refused run must write nothing";
  }
}

// The options the ranks are given: the document after --rank-config (session/run_options.h).
nlohmann::json rank_options(const std::vector<std::string>& argv) {
  const auto at = std::find(argv.begin(), argv.end(), "--rank-config");
  if (at == argv.end() || at + 1 == argv.end()) return nullptr;
  return ts::session::decode_document(*(at + 1)).at("options");
}

// The arguments the stand-in mpirun was given, one per line.
std::vector<std::string> read_lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool has(const std::vector<std::string>& argv, std::initializer_list<std::string> seq) {
  return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
}

bool contains(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

}  // namespace

TEST(CliPs, BadParameterServerInputIsRefusedWithNothingWritten) {
  expect_refused({
      {"resnet50 --strategy ps --nproc 2 --servers 0", "--servers must be from 1 to 4096 (got 0)"},
      {"resnet50 --strategy ps --nproc 2 --servers 4097", "--servers must be from 1 to 4096 (got 4097)"},
      {"resnet50 --strategy ps --servers 3 --nproc 2",
       "--servers 3 asks for more co-located servers than there are workers (--nproc 2)"},
      {"resnet50 --strategy ps --hosts 127.0.0.1:2 --servers 3",
       "asks for more co-located servers than there are workers"},
      {"resnet50 --strategy ps --nproc 2 --staleness -1", "--staleness must be from 0 to 1000000 (got -1)"},
      {"resnet50 --strategy ps --nproc 2 --staleness 1000001", "--staleness must be from 0 to 1000000 (got 1000001)"},
      {"resnet50 --strategy ps --nproc 1", "--strategy ps needs --nproc 2 or more, or --dedicated-servers"},
      {"resnet50 --strategy ps", "--strategy ps needs --nproc 2 or more, or --dedicated-servers"},
      {"resnet50 --strategy ps --hosts 127.0.0.1:1", "--strategy ps needs --nproc 2 or more"},
      {"a3c --nproc 2", "a3c's actor-learners are asynchronous: run it across ranks with --strategy ps"},
      {"a3c --strategy allreduce --nproc 2", "run it across ranks with --strategy ps"},
      {"a3c --strategy ps --nproc 2", "a3c's actor-learners push to the parameter server asynchronously: use --ps-mode "
                                      "async or eager (got sync)"},
      {"a3c --strategy ps --nproc 2 --staleness 1", "use --ps-mode async or eager (got bounded)"},
      {"resnet50 --servers 2 --nproc 2", "--servers needs --strategy ps"},
      {"resnet50 --strategy allreduce --nproc 2 --ps-mode async", "--ps-mode needs --strategy ps"},
      {"resnet50 --nproc 2 --dedicated-servers", "--dedicated-servers needs --strategy ps"},
      {"resnet50 --nproc 2 --server-hosts 127.0.0.1:1", "--server-hosts needs --strategy ps"},
      {"resnet50 --nproc 2 --staleness 3", "--staleness needs --strategy ps"},
      {"resnet50 --nproc 2 --chunk-mb 2", "--chunk-mb needs --strategy ps"},
      {"resnet50 --strategy ps --nproc 2 --bucket-mb 5",
       "--bucket-mb is an all-reduce option: it does not apply with --strategy ps"},
      {"resnet50 --strategy ps --nproc 2 --bucket-order reverse_registration",
       "--bucket-order is an all-reduce option"},
      {"resnet50 --strategy ps --nproc 2 --no-overlap", "--no-overlap is an all-reduce option"},
      {"resnet50 --strategy ps --nproc 2 --partition-mb 1", "--partition-mb is an all-reduce option"},
      {"resnet50 --strategy ps --nproc 2 --no-cross-barrier", "--no-cross-barrier is an all-reduce option"},
      {"resnet50 --strategy ps --nproc 2 --ps-mode bogus",
       "--ps-mode must be sync, async, bounded or eager (got 'bogus')"},
      {"resnet50 --strategy ps --nproc 2 --staleness 2 --ps-mode sync",
       "--staleness 2 applies to --ps-mode bounded only (got --ps-mode sync)"},
      {"resnet50 --strategy ps --nproc 2 --staleness 2 --ps-mode eager", "applies to --ps-mode bounded only"},
      {"resnet50 --strategy ps --nproc 2 --chunk-mb 0.001",
       "--chunk-mb must be more than 0.001 and at most 4096 MiB (got 0.001)"},
      {"resnet50 --strategy ps --nproc 2 --chunk-mb 4096.5", "--chunk-mb must be more than 0.001 and at most 4096"},
      {"resnet50 --strategy ps --nproc 2 --chunk-mb nan", "--chunk-mb must be more than 0.001"},
      {"a3c --strategy ps --ps-mode async --nproc 2 --device cuda",
       "a3c's actor-learners train on the parameter server from the CPU: --device cpu (got --device cuda)"},
      {"resnet50 --strategy ring --nproc 2", "--strategy must be allreduce or ps (got 'ring')"},
      {"resnet50 --strategy ps --nproc 2 --server-hosts a:0", "--server-hosts: host 'a': slots must be"},
      {"resnet50 --strategy ps --nproc 2 --servers 99999999999999999999", "out of range"},
      {"resnet50 --strategy ps --nproc 2 --staleness 1e3", "not a whole decimal number"},
      // Checked by the launcher, before any rank starts.
      {"resnet50 --strategy ps --nproc 2 --servers 2 --server-hosts 127.0.0.1:1",
       "--servers 2 asks for more servers than --server-hosts offer (1 slots)"},
      {"resnet50 --strategy ps --hosts 127.0.0.1:2 --nproc 2 --dedicated-servers",
       "--nproc 2 and 1 dedicated server ask for 3 ranks, more than the hosts offer (2 slots"},
      {"resnet50 --strategy ps --nproc 2 --server-hosts no-such-host.invalid:1", "unknown host 'no-such-host.invalid'"},
  });
}

// The same checks for a suite's keys: the whole file is refused before any run, nothing written.
TEST(CliPs, SuiteEntryWithABadPsKeyIsRefusedWithNothingWritten) {
  const std::vector<Refused> cases = {
      {"strategy = \"ps\"\nnproc = 2\nservers = 0\n", "key 'servers' must be an integer in 1..4096 (got integer 0)"},
      {"strategy = \"ps\"\nnproc = 2\nservers = 3\n", "--servers 3 asks for more co-located servers"},
      {"strategy = \"ps\"\nnproc = 2\nstaleness = -1\n",
       "key 'staleness' must be an integer in 0..1000000 (got integer -1)"},
      {"strategy = \"ps\"\nnproc = 2\nps_mode = \"bogus\"\n",
       "key 'ps_mode' must be sync, async, bounded or eager (got 'bogus')"},
      {"strategy = \"ps\"\nnproc = 2\nstaleness = 2\nps_mode = \"sync\"\n",
       "key 'staleness' 2 applies to ps_mode = \"bounded\" only (got ps_mode = \"sync\")"},
      {"strategy = \"ps\"\nnproc = 2\nbucket_mb = 5\n",
       "key 'bucket_mb' is an all-reduce option: it does not apply with strategy = \"ps\""},
      {"nproc = 2\nservers = 2\n", "key 'servers' needs strategy = \"ps\""},
      {"strategy = \"ps\"\nnproc = 1\n", "--strategy ps needs --nproc 2 or more, or --dedicated-servers"},
      {"strategy = \"ps\"\nnproc = 2\nchunk_mb = 0.001\n", "key 'chunk_mb' must be more than 0.001"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    std::ofstream(dir / "s.toml") << "[[run]]\nworkload = \"resnet50\"\n" << c.args;
    const auto db = dir / "sub" / "s.db";
    const auto res = run_trainscope("suite " + (dir / "s.toml").string() + " --db " + db.string());
    EXPECT_EQ(res.exit_code, 2) << c.args << "\n" << res.out;
    EXPECT_NE(res.out.find(c.says), std::string::npos) << c.args << ": expected '" << c.says << "' in\n" << res.out;
    EXPECT_NE(res.out.find("s.toml:"), std::string::npos) << res.out;
    EXPECT_NE(res.out.find(": run #1: "), std::string::npos) << res.out;
    EXPECT_FALSE(std::filesystem::exists(dir / "sub")) << c.args << ": a refused suite must write nothing";
  }
}

// What a --strategy ps launch hands mpirun: the ranks' PS options (in the one document a rank
// rebuilds its config from; the all-reduce's at their defaults), the
// workers then the dedicated servers, and with --server-hosts every rank's host in rank order
// (--map-by seq). The stand-in mpirun records its arguments and starts nothing: the launcher
// then refuses the run (exit 2) with nothing written.
TEST(CliPs, PsOptionsReachTheRanksAndServerHostsPlaceTheServerRanks) {
  TempDir dir;
  const auto args = dir / "args";
  const auto fake = dir / "mpirun";
  std::ofstream(fake) << "#!/bin/sh\nprintf '%s\\n' \"$@\" > '" << args.string() << "'\nexit 1\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const auto launch = [&](const std::string& run_args) {
    std::filesystem::remove(args);
    const auto db = dir / "sub" / "t.db";
    const auto res = run_command("TS_MPIRUN='" + fake.string() + "' " + std::string(TRAINSCOPE_BIN) + " run resnet50 " +
                                 run_args + " --db " + db.string());
    EXPECT_EQ(res.exit_code, 2) << run_args << "\n" << res.out;
    EXPECT_NE(res.out.find("the ranks did not start"), std::string::npos) << res.out;
    EXPECT_FALSE(std::filesystem::exists(dir / "sub")) << run_args;
    return std::make_pair(read_lines(args), res.out);
  };

  // Co-located servers: the workers' ranks only.
  auto [argv, out] = launch("--strategy ps --nproc 3 --servers 2 --ps-mode async --chunk-mb 0.5 --priority");
  EXPECT_TRUE(has(argv, {"-np", "3"}));
  EXPECT_FALSE(contains(argv, "--strategy")) << "the ranks get one document, not re-built flags";
  auto options = rank_options(argv);
  ASSERT_TRUE(options.is_object()) << out;
  EXPECT_EQ(options["strategy"], "ps");
  EXPECT_EQ(options["servers"], 2);
  EXPECT_EQ(options["ps-mode"], "async");
  EXPECT_EQ(options["chunk-mb"], 0.5);
  EXPECT_EQ(options["priority"], true);
  EXPECT_EQ(options["dedicated-servers"], false);
  EXPECT_EQ(options["staleness"], 0) << "only bounded mode takes a staleness";
  // The all-reduce's stay at their defaults, which a rank's validate() requires under ps.
  EXPECT_EQ(options["bucket-mb"], 25.0);
  EXPECT_EQ(options["bucket-order"], "arrival");
  EXPECT_EQ(options["partition-mb"], 4.0);

  // Dedicated servers: ranks after the workers; --staleness alone means bounded.
  std::tie(argv, out) = launch("--strategy ps --nproc 2 --dedicated-servers --servers 2 --staleness 3");
  EXPECT_TRUE(has(argv, {"-np", "4"}));
  options = rank_options(argv);
  ASSERT_TRUE(options.is_object()) << out;
  EXPECT_EQ(options["ps-mode"], "bounded");
  EXPECT_EQ(options["staleness"], 3);
  EXPECT_EQ(options["dedicated-servers"], true);
  EXPECT_NE(out.find("2 workers, then 2 parameter servers"), std::string::npos) << out;

  // A single worker with a dedicated server is two ranks, and so is launched.
  std::tie(argv, out) = launch("--strategy ps --nproc 1 --dedicated-servers");
  EXPECT_TRUE(has(argv, {"-np", "2"}));

  // Server hosts: rank i on the i-th host of the list (addresses of this machine; a fresh machine may not resolve
  // "localhost").
  std::tie(argv, out) = launch("--strategy ps --hosts 127.0.0.1:2 --servers 2 --server-hosts 127.0.0.3:1,127.0.0.2:1");
  EXPECT_TRUE(has(argv, {"-np", "4"}));
  EXPECT_TRUE(has(argv, {"--map-by", "seq", "--host", "127.0.0.1,127.0.0.1,127.0.0.3,127.0.0.2"}));
  options = rank_options(argv);
  ASSERT_TRUE(options.is_object()) << out;
  EXPECT_EQ(options["server-hosts"], "127.0.0.3:1,127.0.0.2:1");
  EXPECT_EQ(options["dedicated-servers"], true) << "--server-hosts implies it";
  EXPECT_FALSE(options.contains("hosts")) << "the launcher's own options are not the ranks'";

  // An all-reduce launch: the all-reduce's options, the parameter server's at their defaults.
  std::tie(argv, out) = launch("--nproc 2 --bucket-mb 5");
  options = rank_options(argv);
  ASSERT_TRUE(options.is_object()) << out;
  EXPECT_EQ(options["bucket-mb"], 5.0);
  EXPECT_EQ(options["strategy"], "allreduce");
  EXPECT_EQ(options["servers"], 1);
}
