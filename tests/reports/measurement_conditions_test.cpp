// The verdict on a run's measurement conditions (reports/measurement_conditions.h): clean, noisy
// with each threshold crossed in words, or unknown when the run stored none.
#include "reports/measurement_conditions.h"

#include <gtest/gtest.h>

#include "reports/run_digest.h"

using namespace ts::reports;

namespace {

using T = NoiseThresholds;

// A clean run on 2 cores with 2 threads, every figure well inside its threshold.
std::map<std::string, double> clean() {
  return {{"conditions_cpu_got_of_asked_percent", 98},
          {"conditions_threads_asked", 2},
          {"conditions_online_cores", 2},
          {"conditions_process_cores", 1.96},
          {"conditions_job_processes_on_host", 1},
          {"conditions_other_processes_cores", 0.05},
          {"conditions_steal_percent", 0.0},
          {"conditions_load_average_start", 0.3},
          {"conditions_load_average_end", 1.8},
          {"conditions_cpu_frequency_mhz", 2400}};
}

bool mentions(const Conditions& c, const std::string& words) {
  return c.verdict_line().find(words) != std::string::npos;
}

}  // namespace

TEST(RunDigestConditions, CleanWhenEveryFigureIsInside) {
  const Conditions c = judge_conditions(clean());
  EXPECT_EQ(c.verdict, Conditions::Verdict::clean);
  EXPECT_TRUE(c.reasons.empty());
  EXPECT_EQ(c.verdict_line(), "clean");
  EXPECT_EQ(c.figures_line(),
            "CPU 98% of 2 threads; other processes 0.05 cores; steal 0.0%; load 0.3 -> 1.8 on 2 cores; 2400 MHz");
}

TEST(RunDigestConditions, ThresholdsAreStrict) {  // exactly at a threshold is still clean
  auto m = clean();
  m["conditions_cpu_got_of_asked_percent"] = T::min_cpu_got_of_asked_percent;
  m["conditions_other_processes_cores"] = T::max_other_processes_cores;
  m["conditions_steal_percent"] = T::max_steal_percent;
  m["conditions_load_average_start"] = T::max_load_per_core_at_start * 2;
  EXPECT_EQ(judge_conditions(m).verdict, Conditions::Verdict::clean);
}

TEST(RunDigestConditions, EachReasonAlone) {
  {
    auto m = clean();
    m["conditions_cpu_got_of_asked_percent"] = 41;
    const Conditions c = judge_conditions(m);
    EXPECT_EQ(c.verdict, Conditions::Verdict::noisy);
    ASSERT_EQ(c.reasons.size(), 1u);
    EXPECT_EQ(c.verdict_line(), "noisy: the run got 41% of the 2 cores it asked for");
  }
  {
    auto m = clean();
    m["conditions_other_processes_cores"] = 1.2;
    const Conditions c = judge_conditions(m);
    EXPECT_EQ(c.verdict, Conditions::Verdict::noisy);
    EXPECT_EQ(c.verdict_line(), "noisy: other processes used 1.20 cores");
  }
  {
    auto m = clean();
    m["conditions_steal_percent"] = 7.5;
    const Conditions c = judge_conditions(m);
    EXPECT_EQ(c.verdict, Conditions::Verdict::noisy);
    EXPECT_EQ(c.verdict_line(), "noisy: the hypervisor stole 7.5% of the CPU time");
  }
  {
    auto m = clean();
    m["conditions_load_average_start"] = 5.1;
    const Conditions c = judge_conditions(m);
    EXPECT_EQ(c.verdict, Conditions::Verdict::noisy);
    EXPECT_EQ(c.verdict_line(), "noisy: load 5.1 on 2 cores when it began");
  }
}

// The user's machine: a 2-core box that other work was using.
TEST(RunDigestConditions, SeveralReasonsInOneLine) {
  auto m = clean();
  m["conditions_cpu_got_of_asked_percent"] = 41;
  m["conditions_other_processes_cores"] = 1.2;
  m["conditions_load_average_start"] = 5.1;
  const Conditions c = judge_conditions(m);
  EXPECT_TRUE(c.noisy());
  ASSERT_EQ(c.reasons.size(), 3u);
  EXPECT_EQ(c.verdict_line(),
            "noisy: the run got 41% of the 2 cores it asked for; other processes used 1.20 cores; load 5.1 on 2 "
            "cores when it began");
}

TEST(RunDigestConditions, MoreThreadsThanCoresSaysSo) {
  auto m = clean();
  m["conditions_threads_asked"] = 4;
  m["conditions_cpu_got_of_asked_percent"] = 49;
  const Conditions c = judge_conditions(m);
  EXPECT_TRUE(c.noisy());
  EXPECT_TRUE(mentions(c, "49% of the 4 cores it asked for (more threads than the 2 cores online)"))
      << c.verdict_line();
}

// A distributed run's other ranks on the host are other processes to rank 0: not judged as such.
TEST(RunDigestConditions, OtherRanksOnTheHostAreNotOtherWork) {
  auto m = clean();
  m["conditions_job_processes_on_host"] = 2;
  m["conditions_other_processes_cores"] = 1.0;
  const Conditions c = judge_conditions(m);
  EXPECT_EQ(c.verdict, Conditions::Verdict::clean);
  EXPECT_NE(c.figures_line().find("with this job's 1 other ranks here"), std::string::npos) << c.figures_line();
}

TEST(RunDigestConditions, UnknownWithoutConditionsNeverClean) {
  const Conditions none = judge_conditions({{"throughput", 10}, {"timed_iterations", 5}});
  EXPECT_EQ(none.verdict, Conditions::Verdict::unknown);
  EXPECT_EQ(none.label(), "unknown (not recorded)");
  EXPECT_EQ(none.verdict_line(), "unknown (not recorded)");
  EXPECT_TRUE(none.figures_line().empty());
  // Figures without the CPU share (a partial record) are not enough for "clean" either.
  auto m = clean();
  m.erase("conditions_cpu_got_of_asked_percent");
  EXPECT_EQ(judge_conditions(m).verdict, Conditions::Verdict::unknown);
}

TEST(RunDigestConditions, UnreadableFiguresAreSaidSoAndNotJudged) {
  auto m = clean();
  m.erase("conditions_cpu_frequency_mhz");
  m.erase("conditions_steal_percent");
  m.erase("conditions_other_processes_cores");
  const Conditions c = judge_conditions(m);
  EXPECT_EQ(c.verdict, Conditions::Verdict::clean);
  EXPECT_NE(c.figures_line().find("steal unreadable"), std::string::npos);
  EXPECT_NE(c.figures_line().find("frequency unreadable"), std::string::npos);
}
