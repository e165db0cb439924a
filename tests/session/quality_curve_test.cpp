// Evaluation during training (session/quality_curve.h): which iterations are followed by an
// evaluation, the training time a point carries (warm-up in, evaluations out), and the first
// point at or past the target in the workload's direction.
#include "session/quality_curve.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace {

using ts::session::QualityCurve;
using ts::workloads::IterationResult;
using ts::workloads::Quality;

// Iteration i (0-based, the first `warmup` of them warm-up) lasting (i + 1) ms, starting after
// a 1 s gap (an evaluation) that must not count.
IterationResult iteration(int64_t i, int64_t warmup) {
  IterationResult it;
  it.index = i;
  it.warmup = i < warmup;
  it.start_ns = i * 1'000'000'000;
  it.end_ns = it.start_ns + (i + 1) * 1'000'000;
  return it;
}

std::map<std::string, double> metrics_of(const QualityCurve& c) {
  std::map<std::string, double> m;
  for (const auto& x : c.run_metrics()) m[x.name] = x.value;
  return m;
}

TEST(QualityCurve, EvaluatesEveryNthTimedIterationAndCountsWarmupButNotEvaluations) {
  QualityCurve curve(/*warmup=*/2, /*eval_every=*/3, /*target=*/0.5);
  std::vector<int64_t> evaluated;
  const std::vector<double> accuracy = {0.2, 0.6, 0.9};
  for (int64_t i = 0; i < 11; ++i) {
    if (!curve.count(iteration(i, 2))) continue;
    evaluated.push_back(i);
    curve.add(Quality{"accuracy", accuracy.at(curve.points().size()), "", true});
  }
  EXPECT_EQ(evaluated, (std::vector<int64_t>{4, 7, 10}));  // after timed iterations 3, 6, 9
  ASSERT_EQ(curve.points().size(), 3u);
  EXPECT_EQ(curve.points()[1].iterations, 8);
  EXPECT_NEAR(curve.points()[1].training_s, (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8) * 1e-3, 1e-12);
  const auto m = metrics_of(curve);
  EXPECT_EQ(m.at("quality_target"), 0.5);
  EXPECT_NEAR(m.at("time_to_quality_s"), 0.036, 1e-12);  // the second point, the first at or past 0.5
  EXPECT_EQ(m.at("iterations_to_quality"), 8);
}

TEST(QualityCurve, ALowerIsBetterTargetAndOneNeverReached) {
  QualityCurve lower(0, 1, 2.0), never(0, 1, 0.1);
  const std::vector<double> loss = {3.0, 2.5, 1.9, 2.2};
  for (int64_t i = 0; i < 4; ++i) {
    for (QualityCurve* c : {&lower, &never}) {
      ASSERT_TRUE(c->count(iteration(i, 0)));
      c->add(Quality{"word_error_rate", loss[static_cast<size_t>(i)], "", false});
    }
  }
  ASSERT_TRUE(lower.reached().has_value());
  EXPECT_EQ(lower.reached()->iterations, 3);
  EXPECT_EQ(lower.reached()->value, 1.9);
  EXPECT_FALSE(never.reached().has_value());
  const auto m = metrics_of(never);
  EXPECT_EQ(m.count("time_to_quality_s"), 0u) << "a target never reached has no time";
  EXPECT_EQ(m.at("quality_target"), 0.1);
}

TEST(QualityCurve, NoEvaluationsWithoutEveryAndNoMetricsWithoutTarget) {
  QualityCurve none(1, 0, std::nullopt);
  for (int64_t i = 0; i < 5; ++i) EXPECT_FALSE(none.count(iteration(i, 1)));
  EXPECT_TRUE(none.run_metrics().empty());
}

}  // namespace
