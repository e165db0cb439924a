// The digest's figures (reports/run_digest.h): each named for what it is, from what the run
// stored, or from what it kept when it was cut short.
#include "reports/run_digest.h"

#include <gtest/gtest.h>

using namespace ts::reports;
using ts::store::IterationRow;
using ts::store::MetricRow;

namespace {

// Iterations of `ms` milliseconds each processing `samples`, the first a warm-up.
std::vector<IterationRow> iterations(const std::vector<std::pair<double, int64_t>>& ms_and_samples) {
  std::vector<IterationRow> out;
  int64_t t = 0, index = 0;
  out.push_back({index++, true, t, t + 1'000'000'000, 1, 0, 0});  // a slow warm-up: never counted
  t += 1'000'000'000;
  for (const auto& [ms, samples] : ms_and_samples) {
    const auto ns = static_cast<int64_t>(ms * 1e6);
    out.push_back({index++, false, t, t + ns, samples, 0, 0});
    t += ns;
  }
  return out;
}

}  // namespace

// The case: one long iteration of many samples among short ones, so the sustained rate
// (work over time) and the median per iteration differ; each keeps its own name.
TEST(RunDigest, SustainedAndMedianPerIterationAreTwoNamedFigures) {
  const std::vector<MetricRow> stored = {
      {"headline_throughput", 6.62, "images/s", -1},
      {"throughput", 6.62, "images/s", -1},
      {"throughput_median", 15.8, "images/s", -1},
      {"throughput_p10", 10.0, "images/s", -1},
      {"throughput_p90", 20.0, "images/s", -1},
      {"iteration_time_median", 250.0, "ms", -1},
      {"timed_iterations", 9, "count", -1},
      {"throughput_median", 99.0, "images/s", 3},  // per-iteration: ignored
  };
  const RunFigures f = run_figures(stored, iterations({{100, 1}}));
  ASSERT_TRUE(f.sustained_headline && f.sustained_samples && f.samples_per_iteration);
  EXPECT_DOUBLE_EQ(f.sustained_headline->value, 6.62);
  EXPECT_EQ(f.sustained_headline->unit, "images/s");
  EXPECT_DOUBLE_EQ(f.samples_per_iteration->median, 15.8);
  EXPECT_DOUBLE_EQ(f.samples_per_iteration->p10, 10.0);
  EXPECT_DOUBLE_EQ(f.samples_per_iteration->p90, 20.0);
  EXPECT_EQ(f.samples_per_iteration->unit, "images/s");
  EXPECT_DOUBLE_EQ(*f.iteration_ms_median, 250.0);
  EXPECT_EQ(f.timed_iterations, 9);
  EXPECT_FALSE(f.from_kept_iterations);  // stored figures win over the kept iterations
  EXPECT_FALSE(f.sustained_tokens);
  const auto listed = f.listed();
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->sustained);
  EXPECT_DOUBLE_EQ(listed->rate.value, 6.62);
}

// A run stored before the sustained rate existed lists its median per iteration, saying so.
TEST(RunDigest, ARunWithoutASustainedRateListsItsMedianAsSuch) {
  const RunFigures f = run_figures({{"throughput_median", 12.5, "", -1}}, {});
  const auto listed = f.listed();
  ASSERT_TRUE(listed);
  EXPECT_FALSE(listed->sustained);
  EXPECT_DOUBLE_EQ(listed->rate.value, 12.5);
  EXPECT_EQ(listed->rate.unit, "samples/s");  // no stored unit: the default
  EXPECT_FALSE(run_figures({}, {}).listed());
}

// Cut short before its final write: the per-iteration figures from the timed iterations it kept
// (warm-up and zero-length ones left out), and no sustained rate.
TEST(RunDigest, ARunCutShortGetsItsFiguresFromTheIterationsItKept) {
  // 10 samples in 100, 200, 400 ms and one of no length: 100, 50, 25 samples/s.
  const RunFigures f =
      run_figures({{"loss_first", 2.0, "", -1}}, iterations({{100, 10}, {200, 10}, {400, 10}, {0, 10}}));
  EXPECT_TRUE(f.from_kept_iterations);
  EXPECT_FALSE(f.sustained_headline);
  EXPECT_FALSE(f.sustained_samples);
  EXPECT_EQ(f.timed_iterations, 3);
  ASSERT_TRUE(f.samples_per_iteration);
  EXPECT_NEAR(f.samples_per_iteration->median, 50.0, 1e-9);
  EXPECT_NEAR(f.samples_per_iteration->p10, 30.0, 1e-9);  // type 7: 25 + 0.2 * (50 - 25)
  EXPECT_NEAR(f.samples_per_iteration->p90, 90.0, 1e-9);  // 50 + 0.8 * (100 - 50)
  EXPECT_NEAR(*f.iteration_ms_median, 200.0, 1e-9);
  const auto listed = f.listed();
  ASSERT_TRUE(listed);
  EXPECT_FALSE(listed->sustained);
}

TEST(RunDigest, TheJobRateSlowestRankAndSharesComeFromTheDigest) {
  RunDigest d;
  d.key.ranks = 4;
  EXPECT_FALSE(d.job_median_per_iteration());
  d.figures.samples_per_iteration = Spread{10.0, 8.0, 12.0, "images/s"};
  EXPECT_DOUBLE_EQ(*d.job_median_per_iteration(), 40.0);
  EXPECT_EQ(d.slowest_rank(), -1);
  d.breakdown = {{0, 10.0}, {1, 12.5}, {2, 11.0}, {3, 12.0}};
  EXPECT_EQ(d.slowest_rank(), 1);
  EXPECT_DOUBLE_EQ(d.share_of_peak(5), 0.0);  // nothing live
  d.peak_bytes = 20;
  EXPECT_DOUBLE_EQ(d.share_of_peak(5), 0.25);
}
