#pragma once
// `trainscope compare BASE NEW`: runs of two selections paired by what they measure (RunKey),
// every timed metric compared on its per-iteration samples pooled over repeats (medians, the
// Hodges-Lehmann relative change with its 95% interval, the Mann-Whitney U p-value, a verdict),
// memory from the ledger compared exactly, a geometric-mean row as benchstat prints one, and the
// regression gate's decision. docs/ci.md says how to read it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "reports/document.h"
#include "reports/run_digest.h"

namespace ts::reports {

enum class Verdict { faster, slower, no_change, too_few_samples, same, grew, shrank, missing };
std::string_view to_string(Verdict);

// Google Benchmark's compare.py warns below this many samples on either side: fewer cannot
// reach significance reliably.
inline constexpr size_t kMinSamples = 9;
// With at least this many completed runs on both sides, throughput is compared over the runs'
// medians (the repetition is the unit, as compare.py and benchstat take it): 4 against 4 is the
// fewest whose exact Mann-Whitney test can reach p < 0.05 (2/70); 3 against 3 cannot (0.1).
inline constexpr size_t kMinRepetitions = 4;
inline constexpr double kSignificance = 0.05;

struct MetricComparison {
  std::string metric, unit;
  bool higher_is_better = false;
  size_t base_n = 0, new_n = 0;
  double base_median = 0, new_median = 0;
  // new / base - 1, its 95% interval; p: two-sided Mann-Whitney U. Both widened by
  // variance_inflation, which the lag-1 autocorrelation of each side's iterations within their
  // runs calls for (autocorrelation: the larger side's). Over repetitions (sample "run": each
  // run's median, kMinRepetitions or more a side) no widening: runs are independent.
  double delta = 0, delta_low = 0, delta_high = 0, p_value = 1;
  double autocorrelation = 0, variance_inflation = 1;
  std::string sample = "iteration";  // or "run"
  Verdict verdict = Verdict::no_change;
};

struct MemoryComparison {
  std::string category;  // "peak" for the total, else a ledger category
  int64_t base_bytes = 0, new_bytes = 0;
  Verdict verdict = Verdict::same;
};

// Something the two sides ran with differently: a key of the stored config ("threads") or of the
// environment ("environment git.revision"), and its value on each side (several repeats that
// disagree: their values joined by " | "; absent: "(none)").
struct Difference {
  std::string what, base, next;
};

// Workspace is what oneDNN and cuDNN ask for their chosen algorithms, which they choose by the
// machine and sometimes the moment: a few KiB more is not a regression. The gate lets it grow by
// this much beyond --memory-tolerance (the larger of the two figures); every other category is
// held to --memory-tolerance alone.
inline constexpr double kWorkspaceTolerancePct = 5;
inline constexpr int64_t kWorkspaceToleranceBytes = int64_t{1} << 20;

// Where the time moved: a CPU op, a GPU kernel, a layer or a collective call ("all_reduce bucket
// 3", a rank's time in it, waiting included, averaged over the ranks), its time per timed
// iteration on each side (the mean over that side's runs of total / timed iterations; traced runs
// only): it names where to look, the throughput row says whether it matters. Where each run
// stored the time in every timed iteration (ops and layers, schema v8), the change is tested:
// Mann-Whitney on the per-iteration times, widened by their autocorrelation as the throughput's
// test is, and judged against kSignificance / (the number tested) (Bonferroni: a comparison
// tests hundreds). Significant culprits rank first, each direction by its change.
struct Culprit {
  std::string kind;  // "op", "kernel", "layer", "collective"
  std::string name;
  double base_ms = 0, new_ms = 0;
  std::optional<double> p_value;  // unset: not tested (no per-iteration times on every run, or too few)
  bool significant = false;       // p below kSignificance / tested
  double delta_ms() const { return new_ms - base_ms; }
};
// How many culprits a comparison keeps (largest growth first), and how many a gate message names.
inline constexpr size_t kCulpritsKept = 10;
inline constexpr size_t kCulpritsNamed = 3;

struct PairComparison {
  RunKey key;
  std::vector<int64_t> base_runs, new_runs;  // run ids (completed ones; the others are listed in `skipped`)
  std::vector<double> base_run_throughput, new_run_throughput;  // each run's median, in run order
  std::vector<MetricComparison> metrics;  // throughput first, then iteration time, phases, exposed comm
  std::vector<MemoryComparison> memory;   // total peak first, then each category
  std::vector<std::string> notes;         // e.g. runs of one side that failed
  std::vector<Difference> differences;    // what the sides ran with differently (the document's first table)
  std::vector<int64_t> noisy_runs;        // runs of either side measured on a busy machine (RunDigest::conditions)
  std::vector<Culprit> culprits;          // most grown first (at most kCulpritsKept), then the most shrunk
  bool across_frameworks = false;         // the sides ran in different frameworks (memory: RSS growth)
};

// A slowdown past the threshold measured while a run of either side was noisy is not judged
// (inconclusive), unless even the least slowdown its interval allows is beyond this many times
// the threshold: a busy machine moved identical runs by up to 24% [15%, 31%] on the 2-core VM at
// load 4-7 (issue 38), an interval whose least slowdown is 17%, under 3 x 10%; a build that
// doubles every op's time (+60-80% per iteration) is beyond it whatever the machine did.
inline constexpr double kNoisyRegressionFactor = 3;

struct GateOptions {
  std::optional<double> fail_on_regression_pct;  // unset: no gate (exit 0 unless bad input)
  double memory_tolerance_pct = 0;               // growth above this (peak or a category) fails the gate
};

struct Comparison {
  std::string base_label, new_label;
  std::vector<PairComparison> pairs;
  std::vector<std::string> only_in_base, only_in_new;  // keys without a partner
  std::vector<std::string> skipped;                    // runs left out and why (failed, lost, ...)
  // Geometric mean over pairs of the throughput ratio new/base (benchstat's geomean row); 0: none.
  double geomean_throughput_ratio = 0;
  // The gate: regressions found (empty: pass). Filled when GateOptions asks for a gate.
  bool gated = false;
  std::vector<std::string> regressions;
  // Configurations whose throughput the gate could not judge (too few samples, none): with no
  // regression, the gate's decision is "inconclusive", which is neither a pass nor a failure.
  std::vector<std::string> inconclusive;
  std::vector<std::string> notes;  // significant slowdowns the gate did not count, and why
};

// Throws std::invalid_argument when no key is in both selections (nothing to compare).
Comparison compare_runs(const std::vector<RunDigest>& base, const std::vector<RunDigest>& next, std::string base_label,
                        std::string new_label, const GateOptions& gate);

// The gate's decision: "failed" (a regression), else "inconclusive", else "passed"; "" ungated.
std::string gate_decision(const Comparison&);

Document comparison_document(const Comparison&);
nlohmann::json comparison_json(const Comparison&);

}  // namespace ts::reports
