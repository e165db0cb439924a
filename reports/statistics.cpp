#include "reports/statistics.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace ts::reports {
namespace {

void check_finite(const std::vector<double>& v, const char* function) {
  if (v.empty()) throw std::invalid_argument(std::string(function) + ": empty sample");
  for (const double x : v) {
    if (!std::isfinite(x)) throw std::invalid_argument(std::string(function) + ": a value is not finite");
  }
}

void check_positive(const std::vector<double>& v, const char* function) {
  check_finite(v, function);
  for (const double x : v) {
    if (x <= 0) throw std::invalid_argument(std::string(function) + ": a value is not positive");
  }
}

void check_confidence(double confidence, const char* function) {
  if (!(confidence > 0 && confidence < 1))
    throw std::invalid_argument(std::string(function) + ": confidence not in (0, 1)");
}

// P(Z > z) for a standard normal Z.
void check_inflation(double f, const char* function) {
  if (!(f >= 1) || !std::isfinite(f)) {
    throw std::invalid_argument(std::string(function) + ": variance_inflation must be finite and at least 1");
  }
}

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

// The z with P(Z > z) = tail, 0 < tail < 1/2, by bisection on normal_sf: it is needed once per
// interval, so a rational approximation's constants would buy nothing but a place for typos.
double normal_upper_quantile(double tail) {
  double below = 0, above = 40;  // normal_sf(40) underflows to 0: every tail lies in between
  for (int i = 0; i < 200 && std::nextafter(below, above) < above; ++i) {
    const double mid = 0.5 * (below + above);
    (normal_sf(mid) > tail ? below : above) = mid;
  }
  return 0.5 * (below + above);
}

// What the test and the interval need from the pooled sample.
struct PooledRanks {
  double u_a = 0;       // pairs (x in a, y in b) with x > y, ties counting 1/2
  double tie_term = 0;  // sum of t^3 - t over the groups of t equal values
  bool ties = false;
};

PooledRanks pool(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<std::pair<double, bool>> pooled;  // (value, from a)
  pooled.reserve(a.size() + b.size());
  for (const double x : a) pooled.emplace_back(x, true);
  for (const double y : b) pooled.emplace_back(y, false);
  std::sort(pooled.begin(), pooled.end(), [](const auto& l, const auto& r) { return l.first < r.first; });

  // Counting pairs group by group, rather than summing midranks, keeps U exact (half-integers).
  PooledRanks r;
  double b_below = 0;
  for (size_t start = 0; start < pooled.size();) {
    size_t end = start;
    double from_a = 0, from_b = 0;
    for (; end < pooled.size() && pooled[end].first == pooled[start].first; ++end) {
      (pooled[end].second ? from_a : from_b) += 1;
    }
    r.u_a += from_a * (b_below + 0.5 * from_b);
    const double t = from_a + from_b;
    r.tie_term += t * t * t - t;
    r.ties = r.ties || t > 1;
    b_below += from_b;
    start = end;
  }
  return r;
}

// C(m + n, m) as a double: each partial product is itself a binomial coefficient, so it is exact
// while below 2^53.
double binomial(size_t m, size_t n) {
  double c = 1;
  for (size_t i = 1; i <= m; ++i) c = c * static_cast<double>(n + i) / static_cast<double>(i);
  return c;
}

// How many of the C(m + n, m) orderings of two samples of m and n values give U = 0, 1, ...,
// max_u. Their generating function is the Gaussian binomial coefficient [m + n choose m]_q =
// prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i) (Harding 1984): one multiplication by 1 - q^(n+i) and
// one division by 1 - q^i (a running sum with stride i) per i, O(m * max_u) with m the smaller
// sample. Neither step looks at a higher power, so the series is cut at max_u; callers need no
// more than m*n/2 (the distribution is symmetric). Counts are doubles: exact below 2^53, within
// about 1e-15 relative above (checked against exact integers for every m <= 8 up to n = 3000),
// and C(m + n, m) with m <= 8 would overflow only for n around 1e38.
std::vector<double> u_counts(size_t m, size_t n, size_t max_u) {
  if (m > n) std::swap(m, n);
  std::vector<double> c(max_u + 1, 0.0);
  c[0] = 1;
  for (size_t i = 1; i <= m; ++i) {
    for (size_t k = max_u; k >= n + i; --k) c[k] -= c[k - n - i];
    for (size_t k = i; k <= max_u; ++k) c[k] += c[k - i];
  }
  return c;
}

// A double's position in the order of doubles, as an unsigned integer (negative values have their
// bits reversed), so that bisection can run over the doubles themselves.
uint64_t order_key(double x) {
  const auto bits = std::bit_cast<uint64_t>(x);
  return (bits >> 63) != 0 ? ~bits : bits | (uint64_t{1} << 63);
}
double from_order_key(uint64_t key) {
  return std::bit_cast<double>((key >> 63) != 0 ? key & ~(uint64_t{1} << 63) : ~key);
}

// The k-th smallest (1-based) of the n1*n2 differences y - x (x in xs, y in ys, both sorted), as
// computed in floating point, without materialising them: for a threshold t, the differences
// at most t are counted in O(n1 + n2) (y - x grows with y and shrinks with x, and rounding keeps
// that order), and the smallest double t whose count reaches k is found by bisection over the
// doubles' order, at most 64 counts. That t is itself one of the differences. A few thousand
// values a side make millions of pairs; this costs 64 * (n1 + n2) instead of sorting them all.
double kth_difference(const std::vector<double>& xs, const std::vector<double>& ys, uint64_t k) {
  const auto count_at_most = [&](double t) {
    uint64_t count = 0;
    size_t j = 0;  // ys[0, j) - x <= t, and j only grows as x does
    for (const double x : xs) {
      while (j < ys.size() && ys[j] - x <= t) ++j;
      count += j;
    }
    return count;
  };
  uint64_t low = order_key(ys.front() - xs.back());
  uint64_t high = order_key(ys.back() - xs.front());  // count_at_most(high) = n1*n2 >= k
  while (low < high) {
    const uint64_t mid = low + (high - low) / 2;
    if (count_at_most(from_order_key(mid)) >= k) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return from_order_key(low) + 0.0;  // -0 -> +0: a zero difference prints as 0
}

}  // namespace

double median(std::vector<double> v) {
  check_finite(v, "median");
  const size_t half = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(half), v.end());
  if (v.size() % 2 == 1) return v[half];
  const double below = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(half));
  return (below + v[half]) / 2;
}

double quantile(std::vector<double> v, double q) {
  check_finite(v, "quantile");
  if (!(q >= 0 && q <= 1)) throw std::invalid_argument("quantile: q not in [0, 1]");
  const double index = static_cast<double>(v.size() - 1) * q;
  const auto below = static_cast<size_t>(std::floor(index));
  const double gamma = index - static_cast<double>(below);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(below), v.end());
  const double lo = v[below];
  if (below + 1 == v.size()) return lo;
  const double hi = *std::min_element(v.begin() + static_cast<std::ptrdiff_t>(below) + 1, v.end());
  // numpy interpolates from the nearer end, which keeps the result within [lo, hi].
  const double step = hi - lo;
  return gamma >= 0.5 ? hi - step * (1 - gamma) : lo + step * gamma;
}

double geometric_mean(const std::vector<double>& positive) {
  check_positive(positive, "geometric_mean");
  double log_sum = 0;
  for (const double x : positive) log_sum += std::log(x);
  return std::exp(log_sum / static_cast<double>(positive.size()));
}

bool mann_whitney_uses_exact(size_t n1, size_t n2, bool ties) {
  return !ties && std::min(n1, n2) <= kMannWhitneyExactMaxSmallSample && n1 * n2 <= kMannWhitneyExactMaxPairs;
}

MannWhitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b, double variance_inflation) {
  check_finite(a, "mann_whitney_u");
  check_finite(b, "mann_whitney_u");
  check_inflation(variance_inflation, "mann_whitney_u");
  const PooledRanks ranks = pool(a, b);
  const double n1 = static_cast<double>(a.size()), n2 = static_cast<double>(b.size());
  MannWhitney result;
  result.u = ranks.u_a;
  result.exact = variance_inflation == 1 && mann_whitney_uses_exact(a.size(), b.size(), ranks.ties);
  const double u_low = std::min(ranks.u_a, n1 * n2 - ranks.u_a);  // the nearer tail: both are as likely
  if (result.exact) {
    const auto u = static_cast<size_t>(u_low);  // no ties: an integer
    const std::vector<double> counts = u_counts(a.size(), b.size(), u);
    double at_most_u = 0;
    for (const double c : counts) at_most_u += c;
    result.p_value =
        std::min(1.0, 2 * at_most_u / binomial(std::min(a.size(), b.size()), std::max(a.size(), b.size())));
    return result;
  }
  const double n = n1 + n2;
  const double variance = variance_inflation * n1 * n2 / 12 * ((n + 1) - ranks.tie_term / (n * (n - 1)));
  if (!(variance > 0)) return result;  // every value equal: nothing tells the samples apart, p = 1
  // The continuity correction moves U half a step towards the mean, as scipy does.
  const double z = (n1 * n2 / 2 - u_low - 0.5) / std::sqrt(variance);
  result.p_value = std::min(1.0, 2 * normal_sf(z));
  return result;
}

ShiftEstimate hodges_lehmann(const std::vector<double>& a, const std::vector<double>& b, double confidence,
                             double variance_inflation) {
  check_finite(a, "hodges_lehmann");
  check_finite(b, "hodges_lehmann");
  check_confidence(confidence, "hodges_lehmann");
  check_inflation(variance_inflation, "hodges_lehmann");
  std::vector<double> xs = a, ys = b;
  std::sort(xs.begin(), xs.end());
  std::sort(ys.begin(), ys.end());
  const uint64_t pairs = static_cast<uint64_t>(xs.size()) * ys.size();

  ShiftEstimate result;
  result.estimate = pairs % 2 == 1 ? kth_difference(xs, ys, pairs / 2 + 1)
                                   : (kth_difference(xs, ys, pairs / 2) + kth_difference(xs, ys, pairs / 2 + 1)) / 2;

  // k: the smallest q with P(U <= q) >= alpha/2; [d(k), d(pairs + 1 - k)] then covers the shift
  // with probability 1 - 2 P(U <= k - 1) > 1 - alpha.
  const double tail = (1 - confidence) / 2;
  uint64_t k = 0;
  if (variance_inflation == 1 && mann_whitney_uses_exact(xs.size(), ys.size(), pool(xs, ys).ties)) {
    const std::vector<double> counts = u_counts(xs.size(), ys.size(), pairs / 2);  // P(U <= pairs/2) >= 1/2 > tail
    const double total = binomial(std::min(xs.size(), ys.size()), std::max(xs.size(), ys.size()));
    // R's qwilcox fuzz: a tail that the distribution reaches exactly counts as reached.
    const double target = tail - 10 * DBL_EPSILON;
    double at_most_k = 0;
    for (; k < pairs / 2; ++k) {
      at_most_k += counts[k] / total;
      if (at_most_k >= target) break;
    }
  } else {
    const double n1 = static_cast<double>(xs.size()), n2 = static_cast<double>(ys.size());
    const double sigma = std::sqrt(variance_inflation * n1 * n2 * (n1 + n2 + 1) / 12);
    const double rank = std::ceil(n1 * n2 / 2 - 0.5 - normal_upper_quantile(tail) * sigma);
    k = static_cast<uint64_t>(std::clamp(rank, 0.0, static_cast<double>((pairs + 1) / 2)));
  }
  k = std::max<uint64_t>(k, 1);  // as R: a sample too small for the confidence gets the full range
  result.low = kth_difference(xs, ys, k);
  result.high = kth_difference(xs, ys, pairs + 1 - k);
  return result;
}

RatioEstimate ratio_estimate(const std::vector<double>& base, const std::vector<double>& next, double confidence,
                             double variance_inflation) {
  check_positive(base, "ratio_estimate");
  check_positive(next, "ratio_estimate");
  const auto logs = [](const std::vector<double>& v) {
    std::vector<double> out;
    out.reserve(v.size());
    for (const double x : v) out.push_back(std::log(x));
    return out;
  };
  const ShiftEstimate shift = hodges_lehmann(logs(base), logs(next), confidence, variance_inflation);
  return {std::exp(shift.estimate), std::exp(shift.low), std::exp(shift.high)};
}

double lag1_autocorrelation(const std::vector<std::vector<double>>& series) {
  double products = 0, squares = 0, values = 0, used = 0;
  for (const auto& s : series) {
    if (s.empty()) continue;
    check_finite(s, "lag1_autocorrelation");
    if (s.size() < 2) continue;
    values += static_cast<double>(s.size());
    ++used;
    // Midranks within the series (ties share theirs), centred on their mean (n + 1) / 2.
    std::vector<size_t> order(s.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&s](size_t x, size_t y) { return s[x] < s[y]; });
    std::vector<double> rank(s.size());
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      while (j + 1 < order.size() && s[order[j + 1]] == s[order[i]]) ++j;
      for (size_t t = i; t <= j; ++t) rank[order[t]] = (static_cast<double>(i + j) / 2 + 1);
      i = j + 1;
    }
    const double centre = (static_cast<double>(s.size()) + 1) / 2;
    for (size_t t = 0; t < s.size(); ++t) {
      const double d = rank[t] - centre;
      squares += d * d;
      if (t + 1 < s.size()) products += d * (rank[t + 1] - centre);
    }
  }
  if (!(squares > 0)) return 0.0;
  const double r = products / squares;
  // The sample estimate is biased towards 0 by about (1 + 4 rho) / n for an AR(1) series of n
  // values (Kendall; Marriott and Pope 1954): corrected with the series' mean length from
  // kAutocorrelationBiasMinLength values on. Shorter series' estimates are so noisy (standard
  // error about 1 / sqrt(n)) that the correction, which scales them by n / (n - 4), would add
  // more spurious inflation than the bias it removes.
  const double n = values / used;
  return n >= kAutocorrelationBiasMinLength ? (r * n + 1) / (n - 4) : r;
}

double autocorrelation_inflation(double rho) {
  if (!std::isfinite(rho)) throw std::invalid_argument("autocorrelation_inflation: rho is not finite");
  const double r = std::clamp(rho, 0.0, kMaxAutocorrelation);
  return (1 + r) / (1 - r);
}

double two_sample_inflation(size_t n_a, double f_a, size_t n_b, double f_b) {
  if (n_a == 0 || n_b == 0) return 1;
  const double a = static_cast<double>(n_a), b = static_cast<double>(n_b);
  return (f_a / a + f_b / b) / (1 / a + 1 / b);
}

}  // namespace ts::reports
