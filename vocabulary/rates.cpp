#include "vocabulary/rates.h"

#include <algorithm>

namespace ts::vocabulary {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::vector<NamedFigure> rate_figures(std::span<const TimedIteration> timed, const RateUnits& units) {
  std::vector<double> throughput, token_throughput, iteration_ms;
  double seconds = 0, samples = 0, tokens = 0;
  for (const TimedIteration& it : timed) {
    iteration_ms.push_back(it.seconds * 1e3);
    if (it.seconds > 0) throughput.push_back(it.samples / it.seconds);
    if (it.seconds > 0 && it.tokens > 0) token_throughput.push_back(it.tokens / it.seconds);
    seconds += it.seconds;
    samples += it.samples;
    tokens += it.tokens;
  }
  std::vector<NamedFigure> out;
  if (throughput.empty() || seconds <= 0) return out;
  const std::string sample_rate = units.samples + "/s";
  const std::string token_rate = (units.tokens.empty() ? std::string("tokens") : units.tokens) + "/s";
  out.push_back({"throughput", samples / seconds, sample_rate});
  out.push_back({"throughput_median", percentile(throughput, 0.5), sample_rate});
  out.push_back({"throughput_p10", percentile(throughput, 0.1), sample_rate});
  out.push_back({"throughput_p90", percentile(throughput, 0.9), sample_rate});
  out.push_back({"iteration_time_median", percentile(iteration_ms, 0.5), "ms"});
  if (!token_throughput.empty()) {  // sequence workloads: real tokens, or frames
    out.push_back({"tokens_per_s", tokens / seconds, token_rate});
    out.push_back({"tokens_per_s_median", percentile(token_throughput, 0.5), token_rate});
    out.push_back({"tokens_per_s_p10", percentile(token_throughput, 0.1), token_rate});
    out.push_back({"tokens_per_s_p90", percentile(token_throughput, 0.9), token_rate});
  }
  const bool by_tokens = units.tokens_headline && !token_throughput.empty();
  out.push_back(
      {"headline_throughput", (by_tokens ? tokens : samples) / seconds, by_tokens ? token_rate : sample_rate});
  return out;
}

}  // namespace ts::vocabulary
