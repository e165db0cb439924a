// How often `compare --fail-on-regression` cries wolf on this machine (docs/ci.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "cli_test_util.h"

using namespace ts::testing;

// The gate's false alarms: the same build against itself, 20 small comparisons run as CI would
// (alternating rounds), should pass at least 19 times at a 10% threshold. A measurement of the
// machine as much as of the gate (label `measurement`, left out of scripts/test): on the 2-vCPU
// development VM it gave 20/20 for days, then 16/20 and 18/20 on a noisier day, whole runs of
// one side 10-25% slower. Run it with `ctest --test-dir build/default -L measurement`.
TEST(Compare, TheSameBuildAgainstItselfPassesTheGateNineteenTimesInTwenty) {
  // The suite bench/gate_false_alarms.sh runs too.
  std::ifstream in(std::string(TS_SOURCE_DIR) + "/bench/gate_false_alarms.toml");
  ASSERT_TRUE(in) << "bench/gate_false_alarms.toml is missing";
  const std::string suite((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int passed = 0, inconclusive = 0;
  std::string alarms;
  for (int trial = 0; trial < 20; ++trial) {
    TempDir dir;
    for (int round = 0; round < 2; ++round) {  // A B, then B A, as scripts/ci-compare
      run_suite(dir, dir / (round == 0 ? "a.db" : "b.db"), suite);
      run_suite(dir, dir / (round == 0 ? "b.db" : "a.db"), suite);
    }
    const auto r = run_trainscope("compare " + (dir / "a.db").string() + " " + (dir / "b.db").string() +
                                  " --fail-on-regression 10");
    // 4: inconclusive (a run measured on a busy machine, say): not a pass, and not a false alarm.
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 4) << r.out;
    if (r.exit_code == 0) {
      ++passed;
    } else if (r.exit_code == 4) {
      ++inconclusive;
    } else {
      alarms += r.out.substr(r.out.find("trainscope: regression"));
    }
  }
  std::fprintf(stderr, "A/A: %d of 20 comparisons passed the gate, %d inconclusive\n", passed, inconclusive);
  EXPECT_GE(passed + inconclusive, 19) << alarms;  // at most one false "slower"
}
