#pragma once
// Two runs side by side, the data only (the view is comparison_view.h): read off the GUI thread,
// judged with the statistics of `trainscope compare` (reports::compare_runs) where the runs
// measure the same thing, and joined row by row (ops and kernels, layers, memory categories,
// ranks) so that every figure has its base, its new value and the difference.
#include <QString>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/comparison.h"
#include "reports/run_digest.h"
#include "store/records.h"

namespace ts::viewer {

struct RunRef {
  QString db;
  qint64 run = 0;
};

// One timed metric (throughput, iteration time, a phase, exposed comm). The medians always;
// `statistics` (compare_runs' row: the Hodges-Lehmann change with its 95% interval, the
// Mann-Whitney p, the verdict) only when the comparison is judged.
struct MetricDelta {
  std::string metric, unit;
  bool higher_is_better = false;
  size_t base_n = 0, new_n = 0;
  std::optional<double> base_median, new_median;  // unset: the metric is not in that run (a workload's own phase)
  // new/base - 1: compare_runs' estimate when judged, else the ratio of the medians; unset when
  // a side lacks the metric or the base's median is 0.
  std::optional<double> change;
  std::optional<reports::MetricComparison> statistics;
};

// Memory at the ledger's peak (rank 0), compared exactly; the verdict (same, grew, shrank) only
// when judged. "peak" is the total and comes first.
struct MemoryDelta {
  std::string category, tbd_class;
  int64_t base_bytes = 0, new_bytes = 0;
  std::optional<reports::Verdict> verdict;
};

// One rank's compute/comm/overlap/idle medians in each run (distributed runs; unset: no such rank).
struct RankBreakdownDelta {
  int64_t rank = 0;
  std::optional<reports::RankBreakdownMedians> base, next;
};

// An op or kernel, joined by (device, name); unset: the op did not run in that run.
struct OpDelta {
  std::string device, name;
  std::optional<store::OpSummaryRow> base, next;
};

// A layer, joined by name; unset: the model of that run has no such layer.
struct LayerDelta {
  std::string layer;
  std::optional<store::LayerRow> base, next;
};

// An environment entry whose value differs between the runs (unset: not recorded for that run).
struct EnvironmentDelta {
  std::string key;
  std::optional<std::string> base, next;
};

struct RunComparison {
  RunRef base_ref, new_ref;
  reports::RunDigest base, next;
  // compare_runs' statistics and verdicts apply: one RunKey, both runs completed with timed
  // iterations. Otherwise `notes` says why not and the changes are ratios of medians.
  bool judged = false;
  std::vector<std::string> notes;
  std::vector<MetricDelta> metrics;           // throughput, iteration time, phases, exposed comm
  std::vector<MemoryDelta> memory;            // peak first, then each category
  std::vector<RankBreakdownDelta> breakdown;  // by rank; empty for single-process runs
  std::vector<OpDelta> ops;                   // the larger total of the two first
  std::vector<LayerDelta> layers;             // base's model order, then the new run's own layers
  std::vector<EnvironmentDelta> environment;  // only the entries that differ, base's order first
};

// The RunKey fields in which two runs differ, as "workload resnet50 vs transformer"; empty: one key.
std::vector<std::string> key_differences(const reports::RunKey& base, const reports::RunKey& next);

// Throws store::StoreError (missing, foreign, newer, corrupt db; a run that is not there).
RunComparison load_run_comparison(const RunRef& base, const RunRef& next);

}  // namespace ts::viewer
