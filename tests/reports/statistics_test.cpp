// The statistics of run-to-run comparisons, against answers computed independently: SciPy 1.17.1
// and NumPy 2.4.6 for the tests and quantiles, and a brute-force Python script for the
// Hodges-Lehmann intervals (every pairwise difference sorted, bounds at the ranks taken from
// SciPy's exact null distribution of U, or from the normal approximation):
//
//   import math; from scipy.stats import mannwhitneyu, norm; from scipy.stats._mannwhitneyu import _MWU
//   def hl(a, b, conf=0.95):
//       d = sorted(y - x for x in a for y in b); N = len(d); n1, n2 = len(a), len(b)
//       est = (d[(N - 1) // 2] + d[N // 2]) / 2; tail = (1 - conf) / 2
//       if min(n1, n2) <= 8 and len(set(a + b)) == n1 + n2:
//           k = next(q for q in range(N + 1) if _MWU(n1, n2).cdf(q) >= tail - 10 * 2.220446049250313e-16)
//       else:
//           k = math.ceil(N / 2 - 0.5 - norm.isf(tail) * math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12))
//       k = max(k, 1); return k, est, d[k - 1], d[N - k]
//
// The interval bounds and estimates are order statistics (or the mean of two), so they are
// compared exactly; p-values to 1e-9 relative.
#include "reports/statistics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

using namespace ts;
using reports::autocorrelation_inflation;
using reports::hodges_lehmann;
using reports::kMaxAutocorrelation;
using reports::lag1_autocorrelation;
using reports::mann_whitney_u;
using reports::ShiftEstimate;
using reports::two_sample_inflation;

namespace {

std::vector<double> counting(int from, int to) {  // from, from + 1, ..., to - 1
  std::vector<double> v;
  for (int i = from; i < to; ++i) v.push_back(i);
  return v;
}

void expect_relative(double actual, double expected, double tolerance = 1e-9) {
  EXPECT_NEAR(actual, expected, std::abs(expected) * tolerance) << "expected " << expected;
}

}  // namespace

TEST(Quantile, MatchesNumpysLinearInterpolation) {
  // numpy.quantile([3.5, -1.25, 7.0, 2.0, 10.5, 0.1, 4.4], q) for each q.
  const std::vector<double> v = {3.5, -1.25, 7.0, 2.0, 10.5, 0.1, 4.4};
  EXPECT_EQ(reports::quantile(v, 0), -1.25);
  EXPECT_EQ(reports::quantile(v, 0.1), -0.43999999999999995);
  EXPECT_EQ(reports::quantile(v, 0.25), 1.05);
  EXPECT_EQ(reports::quantile(v, 0.333), 1.9962000000000004);
  EXPECT_EQ(reports::quantile(v, 0.5), 3.5);
  EXPECT_EQ(reports::quantile(v, 0.9), 8.400000000000002);
  EXPECT_EQ(reports::quantile(v, 1), 10.5);
  EXPECT_EQ(reports::quantile({42.0}, 0.7), 42.0);
}

TEST(Median, TakesTheMiddleOrTheMeanOfTheTwoMiddles) {
  // numpy.median of the values above, and of their first six.
  EXPECT_EQ(reports::median({3.5, -1.25, 7.0, 2.0, 10.5, 0.1, 4.4}), 3.5);
  EXPECT_EQ(reports::median({3.5, -1.25, 7.0, 2.0, 10.5, 0.1}), 2.75);
  EXPECT_EQ(reports::median({5.0}), 5.0);
}

TEST(GeometricMean, MatchesScipy) {
  // scipy.stats.gmean([1.5, 2.25, 8.0, 0.5, 3.0])
  expect_relative(reports::geometric_mean({1.5, 2.25, 8.0, 0.5, 3.0}), 2.096481356314738, 1e-14);
  expect_relative(reports::geometric_mean({2.0, 8.0}), 4.0, 1e-15);
}

TEST(Statistics, EmptyNonFiniteAndOutOfRangeInputsAreRefused) {
  const std::vector<double> none, some = {1.0, 2.0};
  EXPECT_THROW(reports::median(none), std::invalid_argument);
  EXPECT_THROW(reports::median({1.0, NAN}), std::invalid_argument);
  EXPECT_THROW(reports::quantile(none, 0.5), std::invalid_argument);
  EXPECT_THROW(reports::quantile(some, -0.01), std::invalid_argument);
  EXPECT_THROW(reports::quantile(some, 1.01), std::invalid_argument);
  EXPECT_THROW(reports::quantile(some, NAN), std::invalid_argument);
  EXPECT_THROW(reports::geometric_mean(none), std::invalid_argument);
  EXPECT_THROW(reports::geometric_mean({1.0, 0.0}), std::invalid_argument);
  EXPECT_THROW(reports::geometric_mean({1.0, -2.0}), std::invalid_argument);
  EXPECT_THROW(mann_whitney_u(none, some), std::invalid_argument);
  EXPECT_THROW(mann_whitney_u(some, none), std::invalid_argument);
  EXPECT_THROW(mann_whitney_u(some, {1.0, INFINITY}), std::invalid_argument);
  EXPECT_THROW(hodges_lehmann(none, some), std::invalid_argument);
  EXPECT_THROW(hodges_lehmann(some, none), std::invalid_argument);
  EXPECT_THROW(hodges_lehmann(some, some, 0.0), std::invalid_argument);
  EXPECT_THROW(hodges_lehmann(some, some, 1.0), std::invalid_argument);
  EXPECT_THROW(reports::ratio_estimate(none, some), std::invalid_argument);
  EXPECT_THROW(reports::ratio_estimate(some, {1.0, 0.0}), std::invalid_argument);
  EXPECT_THROW(reports::ratio_estimate({-1.0, 2.0}, some), std::invalid_argument);
  EXPECT_THROW(reports::ratio_estimate(some, some, 1.5), std::invalid_argument);
}

TEST(MannWhitney, SmallSamplesWithoutTiesGetTheExactDistribution) {
  // mannwhitneyu([1.1, 2.3, 0.7, 4.2, 3.3], [2.0, 5.1, 6.2, 4.8, 3.9, 5.5], method='exact')
  // -> U 4.0, p 0.05194805194805195 (40 of the 462 orderings have U <= 4 or U >= 26); the
  // normal approximation would have said 0.05523425371806383.
  const std::vector<double> a = {1.1, 2.3, 0.7, 4.2, 3.3}, b = {2.0, 5.1, 6.2, 4.8, 3.9, 5.5};
  const auto r = mann_whitney_u(a, b);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.u, 4.0);
  expect_relative(r.p_value, 0.05194805194805195);
  // The other way round: U is b's, the p-value the same.
  const auto swapped = mann_whitney_u(b, a);
  EXPECT_EQ(swapped.u, 26.0);
  expect_relative(swapped.p_value, 0.05194805194805195);

  // hl(a, b) -> k 4, estimate 2.35, interval [-0.2999999999999998, 4.4]
  const auto shift = hodges_lehmann(a, b);
  EXPECT_EQ(shift.estimate, 2.35);
  EXPECT_EQ(shift.low, -0.2999999999999998);
  EXPECT_EQ(shift.high, 4.4);
}

TEST(MannWhitney, TiesUseTheNormalApproximationWithTieCorrectedVariance) {
  // mannwhitneyu(a, b, method='asymptotic') -> U 21.5, p 0.019453576312223858 (what 'auto' picks)
  const std::vector<double> a = {3, 4, 4, 5, 6, 6, 6, 8, 9, 10}, b = {5, 6, 7, 7, 8, 9, 10, 11, 12, 12, 13};
  const auto r = mann_whitney_u(a, b);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.u, 21.5);
  expect_relative(r.p_value, 0.019453576312223858);
  // hl(a, b) -> k 27, estimate 3.0, interval [1.0, 6.0]
  const auto shift = hodges_lehmann(a, b);
  EXPECT_EQ(shift.estimate, 3.0);
  EXPECT_EQ(shift.low, 1.0);
  EXPECT_EQ(shift.high, 6.0);
}

TEST(MannWhitney, UnequalSizesExactWhenOneSampleIsSmall) {
  // a = [0.5, 17.25, 30.125], b = 0..39: mannwhitneyu(a, b, method='exact') -> U 50.0,
  // p 0.6681792399319342; hl(a, b) -> k 19, 3.625, [-15.125, 21.5]; hl(a, b, 0.90) -> k 25, [-12.125, 18.5]
  const std::vector<double> a = {0.5, 17.25, 30.125}, b = counting(0, 40);
  const auto r = mann_whitney_u(a, b);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.u, 50.0);
  expect_relative(r.p_value, 0.6681792399319342);
  const auto shift = hodges_lehmann(a, b);
  EXPECT_EQ(shift.estimate, 3.625);
  EXPECT_EQ(shift.low, -15.125);
  EXPECT_EQ(shift.high, 21.5);
  const auto narrower = hodges_lehmann(a, b, 0.90);
  EXPECT_EQ(narrower.estimate, 3.625);
  EXPECT_EQ(narrower.low, -12.125);
  EXPECT_EQ(narrower.high, 18.5);
}

TEST(MannWhitney, UnequalSizesBothLargerThanEightAreAsymptotic) {
  // a = [0.31 * i + 0.05 for i in range(12)], b = [0.17 * i + 1.3 for i in range(30)] (no ties):
  // mannwhitneyu(a, b, method='asymptotic') -> U 54.0, p 0.00047546874319150155 ('auto' picks it;
  // exact would be 0.00022355759348887796); hl(a, b) -> k 110, 2.0100000000000002, [1.0, 3.02]
  std::vector<double> a, b;
  for (int i = 0; i < 12; ++i) a.push_back(0.31 * i + 0.05);
  for (int i = 0; i < 30; ++i) b.push_back(0.17 * i + 1.3);
  const auto r = mann_whitney_u(a, b);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.u, 54.0);
  expect_relative(r.p_value, 0.00047546874319150155);
  const auto shift = hodges_lehmann(a, b);
  EXPECT_EQ(shift.estimate, 2.0100000000000002);
  EXPECT_EQ(shift.low, 1.0);
  EXPECT_EQ(shift.high, 3.02);
}

TEST(MannWhitney, IdenticalSamplesAreNotDifferent) {
  // mannwhitneyu([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) -> U 12.5, p 1.0; hl -> k 3, 0.0, [-3, 3]
  const std::vector<double> a = {1, 2, 3, 4, 5};
  const auto r = mann_whitney_u(a, a);
  EXPECT_FALSE(r.exact);  // every value is tied
  EXPECT_EQ(r.u, 12.5);
  EXPECT_EQ(r.p_value, 1.0);
  const auto shift = hodges_lehmann(a, a);
  EXPECT_EQ(shift.estimate, 0.0);
  EXPECT_EQ(shift.low, -3.0);
  EXPECT_EQ(shift.high, 3.0);

  // All ten values equal: the variance is 0. mannwhitneyu([2.0] * 4, [2.0] * 6) -> U 12.0, p 1.0
  const auto flat = mann_whitney_u({2, 2, 2, 2}, {2, 2, 2, 2, 2, 2});
  EXPECT_EQ(flat.u, 12.0);
  EXPECT_EQ(flat.p_value, 1.0);
  const auto none = hodges_lehmann({2, 2, 2, 2}, {2, 2, 2, 2, 2, 2});
  EXPECT_EQ(none.estimate, 0.0);
  EXPECT_EQ(none.low, 0.0);
  EXPECT_EQ(none.high, 0.0);
}

TEST(MannWhitney, FullySeparatedSamples) {
  // 1..8 against 11..18: only 2 of the C(16, 8) = 12870 orderings are as extreme, p = 2/12870.
  // mannwhitneyu(range(1, 9), range(11, 19)) -> U 0.0, p 0.0001554001554001554; hl -> k 14, 10.0, [7.0, 13.0]
  const auto low = counting(1, 9), high = counting(11, 19);
  const auto r = mann_whitney_u(low, high);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.u, 0.0);
  expect_relative(r.p_value, 2.0 / 12870);
  expect_relative(r.p_value, 0.0001554001554001554);
  const auto reversed = mann_whitney_u(high, low);
  EXPECT_EQ(reversed.u, 64.0);
  expect_relative(reversed.p_value, 0.0001554001554001554);
  const auto shift = hodges_lehmann(low, high);
  EXPECT_EQ(shift.estimate, 10.0);
  EXPECT_EQ(shift.low, 7.0);
  EXPECT_EQ(shift.high, 13.0);
  const auto back = hodges_lehmann(high, low);
  EXPECT_EQ(back.estimate, -10.0);
  EXPECT_EQ(back.low, -13.0);
  EXPECT_EQ(back.high, -7.0);

  // 0..49 against 100..149, asymptotic (both over 8): mannwhitneyu(...) -> U 0.0,
  // p 7.066071930388932e-18; hl -> k 966, 100.0, [94.0, 106.0]
  const auto far_low = counting(0, 50), far_high = counting(100, 150);
  const auto large = mann_whitney_u(far_low, far_high);
  EXPECT_FALSE(large.exact);
  EXPECT_EQ(large.u, 0.0);
  expect_relative(large.p_value, 7.066071930388932e-18);
  const auto large_shift = hodges_lehmann(far_low, far_high);
  EXPECT_EQ(large_shift.estimate, 100.0);
  EXPECT_EQ(large_shift.low, 94.0);
  EXPECT_EQ(large_shift.high, 106.0);
}

TEST(MannWhitney, HollanderAndWolfesPermeabilityExample) {
  // Hollander & Wolfe (1973), p. 69, also the example of R's ?wilcox.test: permeability of the
  // chorioamnion at term (x) and at 12-26 weeks (y). By hand, the x above each y:
  //   y = 1.15: 1.89 1.45 1.38 1.91 1.64 1.46 -> 6     y = 0.88: those and 1.04 -> 7
  //   y = 0.90: the same -> 7                          y = 0.74: all but 0.73 -> 9
  //   y = 1.21: 6 (as for 1.15)                        U = 6 + 7 + 7 + 9 + 6 = 35
  // The one-sided p is P(U >= 35) = P(U <= 15) = 382/3003 = 0.1272 (R: "W = 35, p-value =
  // 0.1272"), two-sided 764/3003. mannwhitneyu(x, y) -> U 35.0, p 0.2544122544122544
  // hl(x, y) -> k 9, -0.30500000000000005, [-0.7599999999999999, 0.15000000000000002]
  const std::vector<double> x = {0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46};
  const std::vector<double> y = {1.15, 0.88, 0.90, 0.74, 1.21};
  const auto r = mann_whitney_u(x, y);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.u, 35.0);
  expect_relative(r.p_value, 764.0 / 3003);
  expect_relative(r.p_value, 0.2544122544122544);
  const auto shift = hodges_lehmann(x, y);
  EXPECT_EQ(shift.estimate, -0.30500000000000005);
  EXPECT_EQ(shift.low, -0.7599999999999999);
  EXPECT_EQ(shift.high, 0.15000000000000002);
}

TEST(MannWhitney, ExactDistributionStaysAccurateForAVeryUnevenPair) {
  // 6 values against 2000: C(2006, 6) ~ 9e16 orderings, past what a double counts exactly.
  // a = [3.5, 10.25, 40.75, 150.5, 260.25, 300.5], b = 0..1999:
  // mannwhitneyu(a, b, method='exact') -> U 769.0, p 9.670476774805998e-06;
  // hl(a, b) -> k 3243, 871.75, [412.5, 1331.5]
  const std::vector<double> a = {3.5, 10.25, 40.75, 150.5, 260.25, 300.5}, b = counting(0, 2000);
  const auto r = mann_whitney_u(a, b);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.u, 769.0);
  expect_relative(r.p_value, 9.670476774805998e-06);
  const auto shift = hodges_lehmann(a, b);
  EXPECT_EQ(shift.estimate, 871.75);
  EXPECT_EQ(shift.low, 412.5);
  EXPECT_EQ(shift.high, 1331.5);
}

TEST(MannWhitney, ExactRuleIsScipysWithASizeCap) {
  using reports::mann_whitney_uses_exact;
  EXPECT_TRUE(mann_whitney_uses_exact(8, 8, false));
  EXPECT_TRUE(mann_whitney_uses_exact(8, 500, false));
  EXPECT_TRUE(mann_whitney_uses_exact(500, 1, false));
  EXPECT_FALSE(mann_whitney_uses_exact(9, 9, false));
  EXPECT_FALSE(mann_whitney_uses_exact(3, 3, true));
  EXPECT_TRUE(mann_whitney_uses_exact(8, 524'288, false));  // 8 * 524288 = 2^22 pairs
  EXPECT_FALSE(mann_whitney_uses_exact(8, 524'289, false));
  // 9 against 9 without ties: mannwhitneyu(range(9), [i + 0.5 for i in range(9)]) -> U 36.0,
  // p 0.7239320396139757 (asymptotic; method='exact' would give 0.7304401480872068)
  std::vector<double> b;
  for (int i = 0; i < 9; ++i) b.push_back(i + 0.5);
  const auto r = mann_whitney_u(counting(0, 9), b);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.u, 36.0);
  expect_relative(r.p_value, 0.7239320396139757);
}

TEST(HodgesLehmann, ATailReachedExactlyCountsAsReached) {
  // One value against 79: P(U <= 1) = 2/80 = 0.025 exactly, and alpha/2 is 0.025000000000000022
  // in doubles. R's qwilcox allows 10 epsilon, so k = 1, not 2. hl([39.25], range(79)) -> k 1,
  // -0.25, [-39.25, 38.75]
  const auto shift = hodges_lehmann({39.25}, counting(0, 79));
  EXPECT_EQ(shift.estimate, -0.25);
  EXPECT_EQ(shift.low, -39.25);
  EXPECT_EQ(shift.high, 38.75);
  // Too few values for the confidence: the full range, as R gives.
  const auto tiny = hodges_lehmann({1.0, 2.0}, {4.0, 7.0});
  EXPECT_EQ(tiny.estimate, 4.0);
  EXPECT_EQ(tiny.low, 2.0);
  EXPECT_EQ(tiny.high, 6.0);
}

TEST(HodgesLehmann, OrderStatisticsAgreeWithSortingEveryDifference) {
  // Random samples with ties and negative values, up to 2500 x 2000 = 5 million differences
  // (the selection never materialises them; here they are sorted to check it). All of these are
  // asymptotic, so the ranks follow from z(0.975) = norm.isf(0.025) = 1.959963984540054.
  std::mt19937_64 random(20240611);
  for (const auto& [n1, n2] : {std::pair<int, int>{9, 9}, {30, 70}, {200, 150}, {2500, 2000}}) {
    std::normal_distribution<double> noise(0, 3);
    std::vector<double> a, b;
    for (int i = 0; i < n1; ++i) a.push_back(std::round(noise(random) * 4) / 4);  // quarters: ties
    for (int i = 0; i < n2; ++i) b.push_back(std::round((noise(random) + 1.5) * 4) / 4);
    std::vector<double> d;
    d.reserve(static_cast<size_t>(n1) * n2);
    for (const double x : a) {
      for (const double y : b) d.push_back(y - x);
    }
    const uint64_t pairs = d.size();
    const double sigma = std::sqrt(static_cast<double>(pairs) * (n1 + n2 + 1) / 12);
    const auto k = static_cast<uint64_t>(std::ceil(static_cast<double>(pairs) / 2 - 0.5 - 1.959963984540054 * sigma));
    const auto nth = [&](uint64_t rank) {  // 1-based
      std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(rank - 1), d.end());
      return d[rank - 1];
    };
    const auto shift = hodges_lehmann(a, b);
    EXPECT_EQ(shift.low, nth(k)) << n1 << " x " << n2;
    EXPECT_EQ(shift.high, nth(pairs + 1 - k)) << n1 << " x " << n2;
    const double median = pairs % 2 == 1 ? nth(pairs / 2 + 1) : (nth(pairs / 2) + nth(pairs / 2 + 1)) / 2;
    EXPECT_EQ(shift.estimate, median) << n1 << " x " << n2;
    EXPECT_LE(shift.low, shift.estimate);
    EXPECT_LE(shift.estimate, shift.high);
    EXPECT_LT(shift.low, shift.high);
  }
}

TEST(RatioEstimate, IsTheShiftOfTheLogarithmsMappedBack) {
  // base = [10.2, 11.1, 9.8, 10.5, 10.9, 10.0, 10.3], next = [11.5, 12.0, 11.2, 11.9, 12.4, 11.7]:
  // k, e, lo, hi = hl([math.log(v) for v in base], [math.log(v) for v in next]);
  // [math.exp(v) for v in (e, lo, hi)] -> 1.1367681895653554, 1.072072072072072, 1.1999999999999997
  // (the bounds are 11.9 / 11.1 and 12.0 / 10.0). Logarithms may differ in the last bit between
  // libraries, hence the tolerance.
  const std::vector<double> base = {10.2, 11.1, 9.8, 10.5, 10.9, 10.0, 10.3};
  const std::vector<double> next = {11.5, 12.0, 11.2, 11.9, 12.4, 11.7};
  const auto r = reports::ratio_estimate(base, next);
  expect_relative(r.ratio, 1.1367681895653554, 1e-13);
  expect_relative(r.low, 11.9 / 11.1, 1e-13);
  expect_relative(r.high, 12.0 / 10.0, 1e-13);
  // The same runs twice as slow: the pairwise log ratios are log 2 plus a set symmetric about 0,
  // so the estimate is 2 and the interval's ends are 2/f and 2f for some f > 1.
  std::vector<double> doubled;
  for (const double v : base) doubled.push_back(v * 2);
  const auto same = reports::ratio_estimate(base, doubled);
  expect_relative(same.ratio, 2.0, 1e-14);
  expect_relative(same.low * same.high, 4.0, 1e-14);
  EXPECT_LT(same.low, 2.0);
  EXPECT_GT(same.high, 2.0);
}

// The lag-1 autocorrelation of ranks, pooled over series: a trend is strongly autocorrelated, an
// alternation negatively (which inflates nothing), independent draws about not at all.
TEST(Autocorrelation, TrendsAlternationsAndNoise) {
  std::vector<double> trend, alternating;
  for (int i = 0; i < 50; ++i) {
    trend.push_back(i + 0.1 * (i % 3));
    alternating.push_back(i % 2 == 0 ? 1.0 + i * 1e-3 : 2.0 + i * 1e-3);
  }
  EXPECT_GT(lag1_autocorrelation({trend}), 0.9);
  EXPECT_LT(lag1_autocorrelation({alternating}), -0.4);
  EXPECT_DOUBLE_EQ(autocorrelation_inflation(lag1_autocorrelation({alternating})), 1.0);
  EXPECT_DOUBLE_EQ(autocorrelation_inflation(0.5), 3.0);
  EXPECT_DOUBLE_EQ(autocorrelation_inflation(0.99), (1 + kMaxAutocorrelation) / (1 - kMaxAutocorrelation));
  // Pooled: each series about its own mean rank, so two trends at different levels stay a trend,
  // and a one-value series adds nothing.
  std::vector<double> high = trend;
  for (auto& x : high) x += 1000;
  EXPECT_GT(lag1_autocorrelation({trend, high, {7.0}}), 0.9);
  EXPECT_EQ(lag1_autocorrelation({{1.0}, {}}), 0.0);
  std::mt19937 rng(3);
  std::normal_distribution<double> noise;
  std::vector<double> iid;
  for (int i = 0; i < 2000; ++i) iid.push_back(noise(rng));
  EXPECT_NEAR(lag1_autocorrelation({iid}), 0.0, 0.08);
  EXPECT_THROW(lag1_autocorrelation({{1.0, NAN}}), std::invalid_argument);
  EXPECT_DOUBLE_EQ(two_sample_inflation(10, 3.0, 10, 1.0), 2.0);
  EXPECT_DOUBLE_EQ(two_sample_inflation(30, 1.0, 10, 1.0), 1.0);
  EXPECT_THROW(mann_whitney_u({1, 2, 3}, {4, 5, 6}, 0.5), std::invalid_argument);
}

// Why the inflation is there: two independent AR(1) series of the same process (iterations that
// drift together within a run), compared as if their values were independent, are "significantly
// different" far more often than 5% of the time; with the inflation, about as often as they should.
TEST(Autocorrelation, InflationKeepsTheFalsePositiveRateOfDriftingSeriesNearItsLevel) {
  std::mt19937 rng(11);
  std::normal_distribution<double> noise;
  const auto series = [&](size_t n) {
    std::vector<double> v;
    double x = 0;
    for (size_t i = 0; i < n; ++i) {
      x = 0.8 * x + noise(rng);
      v.push_back(10 + x);
    }
    return v;
  };
  int naive = 0, inflated = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    const auto a = series(40), b = series(40);
    const double f = two_sample_inflation(a.size(), autocorrelation_inflation(lag1_autocorrelation({a})), b.size(),
                                          autocorrelation_inflation(lag1_autocorrelation({b})));
    naive += mann_whitney_u(a, b).p_value < 0.05;
    inflated += mann_whitney_u(a, b, f).p_value < 0.05;
  }
  std::fprintf(stderr, "drifting A/A: p < 0.05 in %d of %d trials naively, %d with the inflation\n", naive, trials,
               inflated);
  EXPECT_GT(naive, trials / 5);            // about 45% on this seed: independence assumed, far too sure
  EXPECT_LT(inflated, trials * 12 / 100);  // near the 5% it should be (the estimate of rho is itself noisy)
  EXPECT_LT(inflated, naive / 2);
}

TEST(Autocorrelation, InflationWidensTheHodgesLehmannInterval) {
  const std::vector<double> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, b = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const ShiftEstimate plain = hodges_lehmann(a, b), wide = hodges_lehmann(a, b, 0.95, 4.0);
  EXPECT_DOUBLE_EQ(plain.estimate, wide.estimate);
  EXPECT_LT(wide.low, plain.low);
  EXPECT_GT(wide.high, plain.high);
  EXPECT_DOUBLE_EQ(hodges_lehmann(a, b, 0.95, 1.0).low, plain.low);  // 1: exactly the old interval
}
