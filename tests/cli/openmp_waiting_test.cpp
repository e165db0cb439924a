// The OpenMP wait policy trainscope chooses as a run begins (cli/openmp_waiting.h).
#include "cli/openmp_waiting.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ts::cli {
namespace {

TEST(OpenMpWaiting, SpinsWhereTheCoresItAsksForAreFree) {
  const auto quiet = choose_openmp_waiting({2, 1}, 2, 0.1);
  EXPECT_EQ(quiet.spin_count, kOpenMpSpinCount);
  EXPECT_TRUE(quiet.warning.empty());
  EXPECT_NE(quiet.why.find("0.1 of 2 cores busy"), std::string::npos) << quiet.why;
  // Half a core of slack: a shell or a sampler beside the run changes nothing.
  EXPECT_EQ(choose_openmp_waiting({2, 1}, 2, 0.45).spin_count, kOpenMpSpinCount);
  EXPECT_EQ(choose_openmp_waiting({4, 1}, 8, 4.0).spin_count, kOpenMpSpinCount);
}

TEST(OpenMpWaiting, SleepsAndWarnsWhereOtherWorkHoldsACoreItsThreadsNeed) {
  const auto busy = choose_openmp_waiting({2, 1}, 2, 1.0);
  EXPECT_EQ(busy.spin_count, kOpenMpSpinCountBusy);
  EXPECT_NE(busy.warning.find("2 threads asked for"), std::string::npos) << busy.warning;
  EXPECT_NE(busy.warning.find("1.0 of 2 cores busy"), std::string::npos) << busy.warning;
  EXPECT_NE(busy.warning.find("--threads 1 may be faster"), std::string::npos) << busy.warning;
  EXPECT_EQ(busy.warning.back(), '\n');
  // A busier machine than its cores (steal, or a reading past the count) suggests one thread.
  const auto over = choose_openmp_waiting({8, 1}, 8, 9.5);
  EXPECT_EQ(over.spin_count, kOpenMpSpinCountBusy);
  EXPECT_NE(over.warning.find("8.0 of 8 cores busy"), std::string::npos) << over.warning;
  EXPECT_NE(over.warning.find("--threads 1 "), std::string::npos) << over.warning;
  EXPECT_NE(choose_openmp_waiting({8, 1}, 8, 3.0).warning.find("--threads 5 "), std::string::npos);
}

TEST(OpenMpWaiting, OneThreadOrAnUnreadableMachineKeepsTheSpinCount) {
  const auto one = choose_openmp_waiting({1, 1}, 2, 2.0);
  EXPECT_EQ(one.spin_count, kOpenMpSpinCount);
  EXPECT_TRUE(one.warning.empty());
  const auto unknown = choose_openmp_waiting({2, 1}, 2, std::nullopt);
  EXPECT_EQ(unknown.spin_count, kOpenMpSpinCount);
  EXPECT_NE(unknown.why.find("unreadable"), std::string::npos);
}

TEST(OpenMpWaiting, CountsTheThreadsOfEveryRankItStartsHere) {
  const auto threads = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    const ThreadRequest r = requested_threads(static_cast<int>(argv.size()), argv.data(), 4);
    return std::pair(r.per_rank, r.ranks);
  };
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(threads({"trainscope", "run", "resnet50"}), P(4, 1));  // 0 or absent: every core
  EXPECT_EQ(threads({"trainscope", "run", "resnet50", "--threads", "0"}), P(4, 1));
  EXPECT_EQ(threads({"trainscope", "run", "resnet50", "--threads", "1"}), P(1, 1));
  EXPECT_EQ(threads({"trainscope", "run", "resnet50", "--threads=2", "--nproc", "2"}), P(2, 2));
  EXPECT_EQ(threads({"trainscope", "run", "resnet50", "--nproc", "2"}), P(2, 2));  // the cores shared
  EXPECT_EQ(threads({"trainscope", "run", "resnet50", "--nproc", "8"}), P(1, 8));
  EXPECT_EQ(threads({"trainscope", "run", "resnet50", "--threads", "1", "--nproc=3", "--hosts", "a:2,b:1"}), P(1, 1));
  EXPECT_EQ(threads({"trainscope", "run", "resnet50", "--threads", "x"}), P(4, 1));  // refused later, by validation
  EXPECT_EQ(threads({"trainscope", "run", "resnet50", "--threads"}), P(4, 1));
  // Two ranks of two threads on four cores, two of them busy: one thread each would fit.
  EXPECT_NE(choose_openmp_waiting({2, 2}, 4, 2.0).warning.find("--threads 1 may be faster"), std::string::npos);
}

}  // namespace
}  // namespace ts::cli
