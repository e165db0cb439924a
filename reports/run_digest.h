#pragma once
// The one place stored rows become figures (docs/formulas.md): what `show`, the summary after a
// run, `runs`, the suite report, `compare` and the viewer print of one stored run, read once
// through store's Reader: its identity (the key that pairs runs across builds), its per-iteration
// samples (the statistics work on these, never on stored summaries alone), and its run-level
// figures, each named for what it is (sustained or median per iteration).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "reports/collective_split.h"
#include "reports/interference.h"
#include "reports/measurement_conditions.h"
#include "reports/rank_clocks.h"
#include "store/reader.h"
#include "store/records.h"

namespace ts::reports {

// Which of TBD's five memory classes (Weights, Gradients, Feature maps, Workspace, Dynamic) a
// stored category belongs to. The memory ledger owns that taxonomy, so the caller supplies it
// (reports read the store and nothing else); empty: no TBD columns.
using MemoryClassifier = std::function<std::string(std::string_view category)>;

// Runs that measure the same thing, in any db: what a comparison pairs and a report groups.
// Runs of different frameworks (trainscope's engine, PyTorch) are different configurations of a
// report; `compare` pairs them when nothing else differs (TBD's framework dimension).
struct RunKey {
  std::string workload, preset, device;
  int64_t batch = 0, ranks = 1;
  std::string framework = "trainscope";
  auto operator<=>(const RunKey&) const = default;
  std::string label() const;  // "resnet50/tiny cpu batch 16 x2 ranks", "... batch 16 (pytorch)"
  RunKey with_framework(std::string f) const {
    RunKey k = *this;
    k.framework = std::move(f);
    return k;
  }
};

// The median and the 10th and 90th percentiles of per-iteration values (quantile(), type 7).
struct Spread {
  double median = 0, p10 = 0, p90 = 0;
  std::string unit;
};
// Empty values: nullopt.
std::optional<Spread> spread_of(const std::vector<double>& values, std::string unit);

struct Rate {
  double value = 0;
  std::string unit;
};

// A run's rates and iteration time (docs/formulas.md, "Throughput"), each named for what it is:
// `sustained_*` is the timed iterations' work over their time, `*_per_iteration` the spread of
// the per-iteration rates. A run stores them when it finishes; for one cut short before that
// (killed, lost, still running) the per-iteration figures come from the iterations it kept
// (a sustained rate is never made up of what may be a partial run).
struct RunFigures {
  int64_t timed_iterations = 0;
  bool from_kept_iterations = false;
  std::optional<Rate> sustained_headline;  // in the workload's own unit (tokens/s where tokens lead)
  std::optional<Rate> sustained_samples, sustained_tokens;
  std::optional<Spread> samples_per_iteration, tokens_per_iteration;
  // The headline's per-iteration spread, in its unit: tokens_per_iteration where the headline
  // counts tokens or frames, else samples_per_iteration. What every view shows beside the
  // sustained headline, labelled "median per iteration".
  std::optional<Spread> headline_per_iteration;
  std::optional<double> iteration_ms_median;

  // The one rate a listing (`runs`, the viewer's runs table) shows: the sustained headline; a run
  // stored before there was one: the median per iteration (`sustained` says which).
  struct Listed {
    Rate rate;
    bool sustained = false;
  };
  std::optional<Listed> listed() const;
  // Whether the headline counts tokens (or frames): its unit is the tokens' rate's.
  bool headline_counts_tokens() const;
  // The other count's sustained rate, shown once beside the headline (pairs beside tokens, tokens
  // beside pairs); unset where there is none.
  std::optional<Rate> other_sustained() const;
};

// Whether a run without stored rates gets them from the iterations it kept (reading them costs
// a query per run, which a listing of many runs may not want).
enum class KeptIterations { ignore, when_not_stored };

// From the run's whole-run metrics (iteration < 0) and, when they hold no rates, its iterations.
RunFigures run_figures(const std::vector<store::MetricRow>& metrics,
                       const std::vector<store::IterationRow>& iterations);
// The same, read through `reader` (iterations only when `kept` asks for them and no rate is stored).
RunFigures read_run_figures(store::Reader& reader, int64_t run, KeptIterations kept);

// One value per timed iteration that stored the phase's rows (0 where such an iteration lacks
// this phase), and its median.
struct PhaseSamples {
  std::string phase;
  std::vector<double> ms;
  double median_ms = 0;
  double share = 0;  // of the timed iterations' time (docs/formulas.md, "Phase shares")
};

struct RankBreakdownMedians {
  int64_t rank = 0;
  double iteration_ms = 0, compute_ms = 0, comm_ms = 0, overlap_ms = 0, exposed_comm_ms = 0, idle_ms = 0;
  double gradient_wait_ms = 0;
};

// An op (CPU) or a kernel (GPU) by its total time over the timed iterations.
struct OpTotal {
  std::string name;
  int64_t count = 0;
  double total_ms = 0;
  std::string device;   // cpu, cuda:N
  double fraction = 0;  // of its list's total time (the CPU ops', or the GPU kernels')
  // Its self time in a typical timed iteration (the median over them); unset where not stored
  // (GPU kernels, runs stored before v7). Rankings use it where every row has one.
  std::optional<double> median_ms_per_iteration;
  std::vector<double> ms_per_iteration;  // its self time in each timed iteration (empty: not stored, before v8)
};

// The step's roofline (docs/formulas.md, "Roofline"), per timed iteration, from the metrics the
// run stored (roofline_*; machine_* where --roofline measured the machine).
struct RooflineClass {
  std::string name;                    // compute, memory, reorder, other (op classes), data, overhead
  double ms = 0, share = 0;            // its time, and its share of the step
  std::optional<double> gflop, gb;     // the op classes' declared work
  std::optional<double> gflops, gbps;  // what they reached, where they took time
  std::optional<double> of_peak;       // of the SGEMM peak (compute) or the copy bandwidth (memory, reorder)
};
struct MachinePeaks {
  double threads = 0, sgemm_gflops = 0, sgemm_gflops_1t = 0, copy_gbps = 0, copy_gbps_1t = 0;
};
struct Roofline {
  double iterations = 0, step_ms = 0;
  std::optional<MachinePeaks> machine;  // unset: the run did not measure the machine
  std::vector<RooflineClass> classes;
};

// One GPU's time per timed iteration (docs/formulas.md, "GPU time breakdown"): a single process's
// from rank 0's metrics gpuN_*, a run of several ranks' per rank from the gpu_breakdown rows.
struct GpuTime {
  std::string device;  // cuda:N
  double busy_fraction = 0;
  double span_ms = 0, compute_ms = 0, comm_ms = 0, exposed_comm_ms = 0, memcpy_ms = 0, memset_ms = 0, idle_ms = 0;
  int64_t rank = 0;                  // whose GPU
  std::optional<double> overlap_ms;  // compute under comm; unset from the metrics, which keep none
};
struct LayerTotal {
  std::string layer;
  double forward_ms = 0, backward_ms = 0;  // per timed iteration, the mean
  int64_t activation_bytes = 0, parameters = 0;
  std::optional<double> median_ms;       // forward + backward in a typical timed iteration (unset: not stored)
  std::vector<double> ms_per_iteration;  // forward + backward in each timed iteration (empty: not stored)
};
// Iterations far slower than the rest (Tukey's "far out": beyond Q3 + 3 x IQR of the timed
// iterations' times): a preempted iteration, a page-fault storm, a stall. They move means and
// totals, not medians; where there are any, the views say how many beside the median.
inline constexpr double kOutlierFenceIqr = 3.0;
inline constexpr size_t kOutlierMinIterations = 8;  // fewer: no quartiles worth the name
struct IterationOutliers {
  size_t count = 0, of = 0;  // outliers among the timed iterations
  double fence_ms = 0;       // Q3 + 3 IQR
  double slowest_ms = 0;
};
// Unset with fewer than kOutlierMinIterations values or none beyond the fence.
std::optional<IterationOutliers> iteration_outliers(const std::vector<double>& iteration_ms);

// One collective call of the iteration ("all_reduce bucket 3"): the time a rank spends in it per
// timed iteration, waiting for the others included, averaged over the ranks (distributed runs).
struct CollectiveTime {
  std::string name;  // the collective and what it carried
  double ms_per_iteration = 0;
  int64_t calls_per_iteration = 0;  // on one rank
};

// Rankings (docs/formulas.md, "Rankings"), the same in `show`, the report and the viewer: ops
// and layers by their time in a typical timed iteration (the median over the timed iterations),
// which a few preempted calls cannot inflate as they inflate a total or a mean; where a row has
// no median stored (before schema v7; GPU kernels) by the total, or the layer's mean. Slowest
// first; ties keep the stored order (ops: by total; layers: model order).
double layer_ranking_ns(double median_per_iteration_ns, double forward_ns, double backward_ns);
std::vector<LayerTotal> slowest_first(std::vector<LayerTotal> layers);
void rank_layer_rows(std::vector<store::LayerRow>& rows);
void rank_op_rows(std::vector<store::OpSummaryRow>& rows);
// OpTotal's (one device's ops or kernels): by the median per iteration where every one has it.
void rank_ops(std::vector<OpTotal>& ops);

struct MemoryCategory {
  std::string category, tbd_class;
  int64_t bytes = 0;
};

// CPU ops or GPU kernels (`gpu`) of a run's op summary, ranked (rank_op_rows), each with its
// share of their total.
std::vector<OpTotal> op_totals(const std::vector<store::OpSummaryRow>& rows, bool gpu);
// From a run's whole-run metrics: the step's roofline (unset when it stored none), and each
// GPU's time per timed iteration (none without timed iterations).
std::optional<Roofline> roofline_of(const std::map<std::string, double>& metrics);
std::vector<GpuTime> gpu_times(const std::map<std::string, double>& metrics, int64_t timed_iterations);
// Each rank's GPUs (by rank, then device) from the stored breakdown rows of the timed iterations:
// their sums divided by the timed iterations, the same figures as gpu_times gives rank 0 (the
// ranks step together; none without timed iterations).
std::vector<GpuTime> gpu_times_by_rank(const std::vector<store::GpuBreakdownRow>& rows, int64_t timed_iterations);

// Compute slowed down by communication beside it (reports/interference.h; docs/formulas.md,
// "Interference"), per timed iteration: one rank's, or the run's (`rank` -1: every rank's sums
// over the ranks' timed iterations, so its times are a rank's mean).
struct InterferedOp {
  std::string op;                             // "conv2d layer3.2.conv2 (backward)", "sgd_step call 3 of 161"
  double interference_ms = 0, jitter_ms = 0;  // per timed iteration
  double reference_ms = 0;                    // the undisturbed instances' median self time
  int64_t disturbed = 0, undisturbed = 0;     // instances
};
struct Interference {
  int64_t rank = -1;
  double compute_ms = 0;                // the op self time measured (what interference is a share of)
  double disturbed_ms = 0;              // of it, under communication on another thread
  double covered_ms = 0;                // of that, ops with a reference (undisturbed instances)
  double unmeasured_ms = 0;             // disturbed_ms - covered_ms: no estimate, not none
  double interference_ms = 0;           // the excess over the reference, capped by the time under communication
  double jitter_ms = 0;                 // what timing noise alone gives the same instances
  double thin_ms = 0;                   // of covered_ms: references from fewer than kThinReference instances
  std::optional<double> covered_share;  // covered / disturbed; unset: nothing disturbed
  double share = 0;                     // interference / compute
  int64_t instances = 0, disturbed_instances = 0, covered_instances = 0, thin_instances = 0;
  std::vector<InterferedOp> top;  // the ops with the most interference (a rank's; none for the run)
};
// Per rank (by rank) from rank_interference's sums, per timed iteration; `names`: the store's
// strings of the ops' ids (missing ids print empty). The last element is the run's (rank -1)
// where there are ranks. `top`: how many ops each rank keeps.
std::vector<Interference> interference_figures(const std::vector<RankInterference>& ranks, int64_t timed_iterations,
                                               const std::map<int64_t, std::string>& names, size_t top = 5);

struct RunDigest {
  std::filesystem::path db;
  store::RunRow run;
  RunKey key;
  std::string status;  // completed, failed, interrupted, running, lost, running?
  std::string suite;   // the suite that made it ("" when none), its entry and repeat
  int64_t suite_entry = 0, suite_repeat = 0;
  std::string unit = "samples/s";  // the headline's: of throughput_per_iteration
  // Per timed iteration of rank 0 (the ranks step together): wall time and the headline's rate of
  // one rank (tokens/s where the headline counts tokens, else samples/s; times ranks for the
  // job's rate). Iterations of no length (a clock step) are left out.
  std::vector<double> iteration_ms, throughput_per_iteration;
  RunFigures figures;                            // the run's rates, sustained and per iteration
  std::vector<PhaseSamples> phases;              // data, forward, backward, optimizer, then a workload's own
  std::optional<double> unaccounted_median_ms;   // per iteration, the time no phase covers (unset: no phases)
  double unaccounted_share = 0;                  // with the phases' shares, adds up to 1
  std::vector<double> exposed_comm_ms;           // per timed iteration, the largest over ranks (empty: one rank)
  std::optional<double> exposed_comm_median_ms;  // its median (unset: one rank)
  std::vector<RankBreakdownMedians> breakdown;   // per rank (distributed runs), by rank
  std::vector<OpTotal> ops;                      // CPU ops, slowest first (rank_op_rows)
  std::vector<OpTotal> kernels;                  // GPU kernels, slowest first (by total: no medians stored)
  std::optional<Roofline> roofline;              // unset: the run stored none (untraced)
  std::vector<GpuTime> gpus;       // by device; several ranks: by rank, then device (empty: no GPU, no timed iteration)
  std::vector<LayerTotal> layers;  // model order
  std::vector<CollectiveTime> collectives;  // distributed runs, most time first
  RankClocks clocks;                        // distributed runs: each rank's clock against rank 0's (v11)
  // Distributed runs with measured clocks: each rank's collectives split into waiting for the
  // last rank and moving data (collective_split.h), per timed iteration; the bound they are
  // good to; calls some rank has no row for.
  std::vector<RankWaitMove> wait_move;
  int64_t wait_move_uncertainty_ns = 0, incomplete_calls = 0, split_calls = 0;
  // Distributed CPU runs with op events: compute slowed by communication beside it, per rank
  // then the run's (rank -1) last (interference_figures); empty otherwise.
  std::vector<Interference> interference;
  std::vector<MemoryCategory> memory;  // at the peak, by category, non-zero ones
  int64_t peak_bytes = 0;              // the sum of every category at the peak
  std::vector<store::EnvEntry> environment;
  std::map<std::string, double> metrics;      // rank 0's whole-run metrics
  Conditions conditions;                      // what the machine gave rank 0: clean, noisy or unknown
  std::optional<IterationOutliers> outliers;  // slow iterations among the timed ones (iteration_outliers)
  // The error ledger's rows checked against this run (schema v15; issue 44): its projections.
  std::vector<store::ProjectionRow> projections;

  bool finished_ok() const { return status == "completed"; }
  // The job's rates, the headline's unit: one rank's times the ranks (they step together).
  std::optional<double> job_sustained() const;
  std::optional<double> job_median_per_iteration() const;
  // The rank with the largest median iteration time; -1 without a breakdown.
  int64_t slowest_rank() const;
  // The rank the others waited for longest in the collectives (wait_move); null without a split
  // or when nobody waited.
  const RankWaitMove* straggler() const;
  // Among the GPUs of two ranks or more, the one that computes longest per timed iteration (the
  // others wait for it in the all-reduce); null otherwise.
  const GpuTime* busiest_gpu() const;
  // A category's share of the peak (0 when nothing was live).
  double share_of_peak(int64_t bytes) const;
};

// A run's measurement conditions alone, judged as the digest judges them (a listing's one query).
Conditions read_conditions(store::Reader& reader, int64_t run);

// What a digest reads beyond its core figures: interference reads every op and comm event of a
// distributed CPU run (about 0.45 us an event), which only `show` and the report print.
struct DigestParts {
  bool interference = true;
};

// Throws store::StoreError when the db cannot be read.
RunDigest digest_run(store::Reader& reader, const std::filesystem::path& db, const store::RunRow& run,
                     const MemoryClassifier& classify, DigestParts parts = {});

// The runs a selection names in one db. Each selector is a run id ("7"), a range ("3-9"), or a
// suite name (every run a suite of that name made); none: every run. Collectives benchmarks
// (no training) are left out. Throws std::invalid_argument naming a selector that matches nothing.
std::vector<RunDigest> select_runs(const std::filesystem::path& db, const std::vector<std::string>& selectors,
                                   const MemoryClassifier& classify, DigestParts parts = {});

}  // namespace ts::reports
