#pragma once
// The rates a run stores (docs/formulas.md, "Throughput"), defined once for trainscope's own runs
// (session/record.cpp) and for runs read from other tools' traces (importers/): sustained, the
// timed iterations' work over their time; the median and spread of the per-iteration rates beside
// it; and the headline, in the workload's own unit.
#include <span>
#include <string>
#include <vector>

namespace ts::vocabulary {

// One timed iteration: its wall time and the work it did (samples; tokens or frames where the
// workload counts them, else 0).
struct TimedIteration {
  double seconds = 0;
  double samples = 0, tokens = 0;
};

// What the work is counted in: "images", "sentence pairs"; tokens' noun ("tokens", "frames", empty:
// none), and whether the headline counts them.
struct RateUnits {
  std::string samples = "samples";
  std::string tokens;
  bool tokens_headline = false;
};

// A whole-run figure as the store keeps it (metrics with iteration -1).
struct NamedFigure {
  std::string name;
  double value = 0;
  std::string unit;
};

// Linear interpolation between order statistics, p in [0, 1]; 0 for no values.
double percentile(std::vector<double> values, double p);

// throughput, throughput_median/_p10/_p90 and iteration_time_median; tokens_per_s and its spread
// where iterations counted tokens; headline_throughput. An iteration of no measurable time adds
// its time to the sustained rates but no per-iteration rate. Empty when nothing was timed.
std::vector<NamedFigure> rate_figures(std::span<const TimedIteration> timed, const RateUnits& units);

}  // namespace ts::vocabulary
