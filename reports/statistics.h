#pragma once
// The statistics of run-to-run comparisons: is `next` faster than `base`, by how much, and how
// sure are we. Timings are skewed and have outliers, so everything here is rank-based or an order
// statistic: the Mann-Whitney U test, the Hodges-Lehmann shift with its distribution-free
// interval, and the same on logarithms for ratios. Every function takes finite values only and
// throws std::invalid_argument otherwise (NaN has no place in an order, and an infinite timing is
// a bug upstream, not a measurement).
#include <cstddef>
#include <vector>

namespace ts::reports {

// The middle value; the mean of the two middle ones for an even count (numpy.median).
double median(std::vector<double> v);

// The q-quantile, q in [0, 1], interpolated linearly between order statistics: numpy.quantile's
// default ('linear', Hyndman & Fan type 7), with numpy's way of interpolating so results agree
// to the last bit where they can.
double quantile(std::vector<double> v, double q);

// exp(mean(log x)); throws on empty input or a value that is not positive.
double geometric_mean(const std::vector<double>& positive);

// Whether the exact null distribution of U is used for samples of these sizes: SciPy's rule for
// mannwhitneyu(method='auto') (exact when one sample has at most 8 values and no two values of
// the pooled sample are equal), and n1 * n2 at most kMannWhitneyExactMaxPairs, past which the
// table would cost more memory and time than a comparison is worth (8 runs against half a million)
// and the normal approximation is used instead.
inline constexpr size_t kMannWhitneyExactMaxSmallSample = 8;
inline constexpr size_t kMannWhitneyExactMaxPairs = size_t{1} << 22;
bool mann_whitney_uses_exact(size_t n1, size_t n2, bool ties);

struct MannWhitney {
  double u = 0;        // pairs (x in a, y in b) with x > y, a tie counting 1/2: scipy's statistic for (a, b)
  double p_value = 1;  // two-sided
  bool exact = false;  // the exact null distribution, rather than the normal approximation
};

// Two-sided Mann-Whitney U test of `a` against `b`, as scipy.stats.mannwhitneyu(a, b,
// alternative='two-sided', method='auto') computes it. Exact (mann_whitney_uses_exact): p = 2 *
// P(U <= min(U_a, U_b)) under the null, capped at 1. Otherwise the normal approximation with
// the variance corrected for ties and a continuity correction of 1/2; p = 1 when every value is
// equal (no variance). Throws on an empty sample.
// `variance_inflation` > 1 (samples that are series, autocorrelated: variance_inflation() below)
// multiplies U's null variance by it and always takes the normal approximation.
MannWhitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b, double variance_inflation = 1);

struct ShiftEstimate {
  double estimate = 0, low = 0, high = 0;
};

// The Hodges-Lehmann shift from `a` to `b`, median(y - x) over every pair (x in a, y in b), and
// its distribution-free confidence interval (Moses; Bauer 1972; R's wilcox.test(conf.int = TRUE)
// with the difference taken the other way): [d(k), d(n1*n2 + 1 - k)], order statistics of the
// pairwise differences, where k is the smallest q with P(U <= q) >= (1 - confidence) / 2 under
// the null, at least 1. P is the exact distribution when mann_whitney_u would use it, else the
// normal approximation with the continuity correction, k = ceil(n1*n2/2 - 1/2 - z*sigma) with
// sigma^2 = n1*n2*(n1+n2+1)/12 (no tie correction: ties in the data do not make the pairwise
// differences any less spread, and leaving it out errs on the side of a wider interval).
// The differences are never all materialised (see statistics.cpp). confidence in (0, 1).
// `variance_inflation` > 1 widens the interval as it widens U's null distribution (above).
ShiftEstimate hodges_lehmann(const std::vector<double>& a, const std::vector<double>& b, double confidence = 0.95,
                             double variance_inflation = 1);

struct RatioEstimate {
  double ratio = 1, low = 1, high = 1;
};

// The relative change from `base` to `next` of positive, time-like or rate-like samples: the
// Hodges-Lehmann shift of the logarithms mapped back, ratio = exp(shift) (next / base), with its
// interval mapped the same way; delta = ratio - 1. Throws on a value that is not positive.
RatioEstimate ratio_estimate(const std::vector<double>& base, const std::vector<double>& next, double confidence = 0.95,
                             double variance_inflation = 1);

// Samples that are iterations of runs are series: a busy neighbour or a clock slows several
// iterations in a row, so neighbours are alike and a series holds less information than as many
// independent values; the rank tests above, which assume independence, would then be too sure.
// The lag-1 autocorrelation of the ranks within each series (robust to a few preempted
// iterations), pooled over the series (each series' own mean rank), corrected for the estimate's
// bias towards 0 in short series: (r n + 1) / (n - 4), n the series' mean length, when n is at
// least kAutocorrelationBiasMinLength; 0 when no series has two values.
inline constexpr double kAutocorrelationBiasMinLength = 20;
double lag1_autocorrelation(const std::vector<std::vector<double>>& series);
// The factor by which autocorrelation rho inflates the variance of a mean (an AR(1) process's
// (1 + rho) / (1 - rho)), with rho taken in [0, kMaxAutocorrelation]: a negative estimate is not
// trusted to narrow anything.
inline constexpr double kMaxAutocorrelation = 0.9;
double autocorrelation_inflation(double rho);
// The inflation of U's null variance for two samples with per-sample inflations f_a and f_b:
// Var(mean rank a - mean rank b) grows as f_a / n_a + f_b / n_b against 1 / n_a + 1 / n_b.
double two_sample_inflation(size_t n_a, double f_a, size_t n_b, double f_b);

}  // namespace ts::reports
