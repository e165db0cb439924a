// The digest's figures (reports/run_digest.h): each named for what it is, from what the run
// stored, or from what it kept when it was cut short.
#include "reports/run_digest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "store/writer.h"

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

// A scratch db path of its own (removed first) and a run of `workload` begun in it.
std::filesystem::path scratch_db(const std::string& name) {
  const auto db = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(db);
  return db;
}
int64_t begin_cpu_run(ts::store::Writer& w, const std::string& workload) {
  ts::store::RunInfo info;
  info.workload = workload;
  info.preset = "tiny";
  info.device = "cpu";
  return w.begin_run(info);
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

// One unit per run (issue 38): where the headline counts tokens (transformer, deepspeech2) its
// per-iteration spread is the tokens', else the samples' (seq2seq counts tokens beside its pairs).
TEST(RunDigest, ThePerIterationSpreadIsInTheHeadlinesUnit) {
  const std::vector<MetricRow> common = {
      {"throughput", 150.0, "sentence pairs/s", -1},     {"throughput_median", 148.0, "sentence pairs/s", -1},
      {"tokens_per_s", 3400.0, "tokens/s", -1},          {"tokens_per_s_median", 3418.0, "tokens/s", -1},
      {"tokens_per_s_p10", 3261.0, "tokens/s", -1},      {"tokens_per_s_p90", 3531.0, "tokens/s", -1},
      {"throughput_p10", 140.0, "sentence pairs/s", -1}, {"throughput_p90", 166.0, "sentence pairs/s", -1}};
  auto tokens_lead = common;
  tokens_lead.push_back({"headline_throughput", 3400.0, "tokens/s", -1});
  const RunFigures t = run_figures(tokens_lead, {});
  ASSERT_TRUE(t.headline_per_iteration);
  EXPECT_EQ(t.headline_per_iteration->unit, "tokens/s");
  EXPECT_DOUBLE_EQ(t.headline_per_iteration->median, 3418.0);
  EXPECT_DOUBLE_EQ(t.headline_per_iteration->p90, 3531.0);
  auto samples_lead = common;
  samples_lead.push_back({"headline_throughput", 150.0, "sentence pairs/s", -1});
  const RunFigures p = run_figures(samples_lead, {});
  ASSERT_TRUE(p.headline_per_iteration);
  EXPECT_EQ(p.headline_per_iteration->unit, "sentence pairs/s");
  EXPECT_DOUBLE_EQ(p.headline_per_iteration->median, 148.0);
}

// The digest's per-iteration rates, what compare and the report test, are in the same unit: a
// tokens-led run's are each iteration's tokens over its time.
TEST(RunDigest, ATokensLedRunsPerIterationRatesCountTokens) {
  const auto db = scratch_db("ts_digest_tokens");
  int64_t run = 0;
  {
    ts::store::Writer w(db);
    run = begin_cpu_run(w, "transformer");
    constexpr int64_t ms = 1'000'000;
    const std::vector<IterationRow> its = {{0, true, 0, 100 * ms, 4, 0, 0},
                                           {1, false, 100 * ms, 200 * ms, 4, 0, 0},
                                           {2, false, 200 * ms, 250 * ms, 5, 0, 0}};
    w.add_iterations(run, its);
    const std::vector<MetricRow> metrics = {{"tokens", 90, "count", 0},
                                            {"tokens", 100, "count", 1},
                                            {"tokens", 80, "count", 2},
                                            {"headline_throughput", 1200.0, "tokens/s", -1},
                                            {"throughput", 60.0, "sentence pairs/s", -1},
                                            {"throughput_median", 60.0, "sentence pairs/s", -1},
                                            {"tokens_per_s", 1200.0, "tokens/s", -1},
                                            {"tokens_per_s_median", 1300.0, "tokens/s", -1}};
    w.add_metrics(run, metrics);
    w.finish_run(run, ts::store::RunStatus::completed, "2026-11-28T00:00:00Z", "");
  }
  ts::store::Reader reader(db);
  const RunDigest d = digest_run(reader, db, *reader.run(run), nullptr);
  std::filesystem::remove(db);
  EXPECT_EQ(d.unit, "tokens/s");
  ASSERT_EQ(d.throughput_per_iteration.size(), 2u);
  EXPECT_NEAR(d.throughput_per_iteration[0], 1000.0, 1e-9);  // 100 tokens in 100 ms
  EXPECT_NEAR(d.throughput_per_iteration[1], 1600.0, 1e-9);  // 80 tokens in 50 ms
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
  EXPECT_FALSE(d.job_sustained());
  d.figures.headline_per_iteration = Spread{10.0, 8.0, 12.0, "images/s"};
  d.figures.sustained_headline = Rate{9.0, "images/s"};
  EXPECT_DOUBLE_EQ(*d.job_median_per_iteration(), 40.0);
  EXPECT_DOUBLE_EQ(*d.job_sustained(), 36.0);
  EXPECT_EQ(d.slowest_rank(), -1);
  d.breakdown = {{0, 10.0}, {1, 12.5}, {2, 11.0}, {3, 12.0}};
  EXPECT_EQ(d.slowest_rank(), 1);
  EXPECT_DOUBLE_EQ(d.share_of_peak(5), 0.0);  // nothing live
  d.peak_bytes = 20;
  EXPECT_DOUBLE_EQ(d.share_of_peak(5), 0.25);
}

// The top ops and kernels: each list by total time, largest first, each a share of its own list.
TEST(RunDigest, OpsAndKernelsAreSharesOfTheirOwnDevicesTotal) {
  std::vector<ts::store::OpSummaryRow> rows(4);
  rows[0].name = "conv";
  rows[0].device = "cpu";
  rows[0].count = 3;
  rows[0].total_ns = 1'000'000;
  rows[1].name = "matmul";
  rows[1].device = "cpu";
  rows[1].total_ns = 3'000'000;
  rows[2].name = "gemm_kernel";
  rows[2].device = "cuda:0";
  rows[2].total_ns = 2'000'000;
  rows[3].name = "relu_kernel";
  rows[3].device = "cuda:0";
  rows[3].total_ns = 2'000'000;
  const auto cpu = op_totals(rows, false);
  ASSERT_EQ(cpu.size(), 2u);
  EXPECT_EQ(cpu[0].name, "matmul");
  EXPECT_DOUBLE_EQ(cpu[0].total_ms, 3.0);
  EXPECT_DOUBLE_EQ(cpu[0].fraction, 0.75);
  EXPECT_DOUBLE_EQ(cpu[1].fraction, 0.25);
  EXPECT_EQ(cpu[1].count, 3);
  const auto gpu = op_totals(rows, true);
  ASSERT_EQ(gpu.size(), 2u);
  EXPECT_EQ(gpu[0].name, "gemm_kernel");  // ties keep their stored order
  EXPECT_EQ(gpu[0].device, "cuda:0");
  EXPECT_DOUBLE_EQ(gpu[0].fraction, 0.5);
}

// The roofline per timed iteration: each class's share of the step; reached rates where a class
// took time; the fraction of the machine's peaks only where the run measured them.
TEST(RunDigest, TheRooflineIsPerIterationWithPeaksOnlyWhereMeasured) {
  EXPECT_FALSE(roofline_of({}));
  std::map<std::string, double> m = {{"roofline_iterations", 2},    {"roofline_step_ns", 20e6},
                                     {"roofline_compute_ns", 10e6}, {"roofline_compute_flops", 50e9},
                                     {"roofline_memory_ns", 4e6},   {"roofline_memory_bytes", 8e9},
                                     {"roofline_data_ns", 2e6},     {"roofline_overhead_ns", 4e6}};
  const auto r = roofline_of(m);
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->step_ms, 10.0);
  EXPECT_FALSE(r->machine);
  ASSERT_EQ(r->classes.size(), 6u);
  const auto& compute = r->classes[0];
  EXPECT_EQ(compute.name, "compute");
  EXPECT_DOUBLE_EQ(compute.ms, 5.0);
  EXPECT_DOUBLE_EQ(compute.share, 0.5);
  EXPECT_DOUBLE_EQ(*compute.gflop, 25.0);
  EXPECT_DOUBLE_EQ(*compute.gflops, 5000.0);
  EXPECT_FALSE(compute.of_peak);
  EXPECT_DOUBLE_EQ(*r->classes[1].gbps, 2000.0);
  EXPECT_FALSE(r->classes[2].gflops);  // reorder took no time: no rate
  EXPECT_EQ(r->classes[4].name, "data");
  EXPECT_DOUBLE_EQ(r->classes[4].share, 0.1);
  double shares = 0;
  for (const auto& c : r->classes) shares += c.share;
  EXPECT_NEAR(shares, 1.0, 1e-12);  // the classes, data and overhead make up the step
  m["machine_sgemm_gflops"] = 10000;
  m["machine_copy_gbps"] = 4000;
  const auto measured = roofline_of(m);
  ASSERT_TRUE(measured && measured->machine);
  EXPECT_DOUBLE_EQ(*measured->classes[0].of_peak, 0.5);
  EXPECT_DOUBLE_EQ(*measured->classes[1].of_peak, 0.5);
  EXPECT_FALSE(measured->classes[3].of_peak);  // other: no peak to hold it to
}

// Each GPU's stored totals divided by the timed iterations; none without any.
TEST(RunDigest, GpuTimeIsPerTimedIteration) {
  const std::map<std::string, double> m = {{"gpu0_span_ns", 40e6},
                                           {"gpu0_compute_ns", 30e6},
                                           {"gpu0_idle_ns", 8e6},
                                           {"gpu0_busy_fraction", 0.8},
                                           {"gpu1_span_ns", 4e6}};
  EXPECT_TRUE(gpu_times(m, 0).empty());
  const auto g = gpu_times(m, 4);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].device, "cuda:0");
  EXPECT_DOUBLE_EQ(g[0].span_ms, 10.0);
  EXPECT_DOUBLE_EQ(g[0].compute_ms, 7.5);
  EXPECT_DOUBLE_EQ(g[0].idle_ms, 2.0);
  EXPECT_DOUBLE_EQ(g[0].busy_fraction, 0.8);
  EXPECT_DOUBLE_EQ(g[0].comm_ms, 0.0);  // not stored: none
  EXPECT_EQ(g[1].device, "cuda:1");
  EXPECT_DOUBLE_EQ(g[1].span_ms, 1.0);
}

// Each rank's GPUs from the breakdown rows: sums over the timed iterations' rows divided by their
// count, per (rank, device), by rank then device; the figures gpu_times gives from rank 0's metrics.
TEST(RunDigest, GpuTimeOfEveryRankIsPerTimedIteration) {
  std::vector<ts::store::GpuBreakdownRow> rows;
  const auto add = [&](int64_t rank, int64_t device, int64_t iteration, int64_t compute_ms, int64_t comm_ms,
                       int64_t overlap_ms) {
    ts::store::GpuBreakdownRow r;
    r.rank = rank;
    r.device = device;
    r.iteration = iteration;
    r.start_ns = iteration * 100'000'000;
    r.end_ns = r.start_ns + 10'000'000;  // a 10 ms span
    r.compute_ns = compute_ms * 1'000'000;
    r.comm_ns = comm_ms * 1'000'000;
    r.overlap_ns = overlap_ms * 1'000'000;
    r.exposed_comm_ns = r.comm_ns - r.overlap_ns;
    r.memcpy_ns = 1'000'000;
    r.busy_ns = r.compute_ns + r.exposed_comm_ns + r.memcpy_ns;
    r.idle_ns = 10'000'000 - r.busy_ns;
    rows.push_back(r);
  };
  add(1, 1, 1, 6, 2, 1);
  add(1, 1, 2, 6, 4, 1);
  add(0, 0, 1, 4, 2, 2);
  add(0, 0, 2, 4, 2, 0);
  EXPECT_TRUE(gpu_times_by_rank(rows, 0).empty());
  const auto g = gpu_times_by_rank(rows, 2);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].rank, 0);
  EXPECT_EQ(g[0].device, "cuda:0");
  EXPECT_DOUBLE_EQ(g[0].span_ms, 10.0);
  EXPECT_DOUBLE_EQ(g[0].compute_ms, 4.0);
  EXPECT_DOUBLE_EQ(g[0].comm_ms, 2.0);
  EXPECT_DOUBLE_EQ(*g[0].overlap_ms, 1.0);
  EXPECT_DOUBLE_EQ(g[0].exposed_comm_ms, 1.0);
  EXPECT_DOUBLE_EQ(g[0].memcpy_ms, 1.0);
  EXPECT_DOUBLE_EQ(g[0].idle_ms, 4.0);
  EXPECT_DOUBLE_EQ(g[0].busy_fraction, 0.6);
  EXPECT_EQ(g[1].rank, 1);
  EXPECT_EQ(g[1].device, "cuda:1");
  EXPECT_DOUBLE_EQ(g[1].compute_ms, 6.0);
  EXPECT_DOUBLE_EQ(g[1].comm_ms, 3.0);
  EXPECT_DOUBLE_EQ(g[1].exposed_comm_ms, 2.0);
  EXPECT_DOUBLE_EQ(g[1].idle_ms, 1.0);
  // From the metrics (one process) no overlap is known.
  EXPECT_FALSE(gpu_times({{"gpu0_span_ns", 1e6}}, 1).at(0).overlap_ms);

  RunDigest d;
  d.gpus = g;
  ASSERT_NE(d.busiest_gpu(), nullptr);
  EXPECT_EQ(d.busiest_gpu()->rank, 1);
  d.gpus.pop_back();  // one rank's GPU alone: nothing to compare
  EXPECT_EQ(d.busiest_gpu(), nullptr);
}

// Phase shares are of the timed iterations' time and, with what no phase covers, add up to 1;
// phases of several threads at once that add up to more than the wall time leave nothing
// unaccounted (docs/formulas.md, "Phase shares").
TEST(RunDigest, PhaseSharesAndTheUnaccountedShareAddUpToOne) {
  const auto db = scratch_db("ts_digest_phases");
  int64_t run = 0;
  {
    ts::store::Writer w(db);
    run = begin_cpu_run(w, "resnet50");
    constexpr int64_t ms = 1'000'000;
    // A warm-up (never counted), then iterations of 10 ms and 20 ms; the third's phases, of two
    // threads, add up to 30 ms in 20 ms of wall time.
    const std::vector<IterationRow> its = {{0, true, 0, 100 * ms, 1, 0, 0},
                                           {1, false, 100 * ms, 110 * ms, 1, 0, 0},
                                           {2, false, 110 * ms, 130 * ms, 1, 0, 0}};
    w.add_iterations(run, its);
    const std::vector<ts::store::PhaseRow> phases = {{0, "forward", 0, 90 * ms, 0},
                                                     {1, "forward", 100 * ms, 104 * ms, 0},
                                                     {1, "backward", 104 * ms, 108 * ms, 0},
                                                     {2, "forward", 110 * ms, 130 * ms, 0},
                                                     {2, "backward", 110 * ms, 120 * ms, 0}};
    w.add_phases(run, phases);
    w.finish_run(run, ts::store::RunStatus::completed, "2026-11-27T00:00:00Z", "");
  }
  ts::store::Reader reader(db);
  const RunDigest d = digest_run(reader, db, *reader.run(run), nullptr);
  std::filesystem::remove(db);
  ASSERT_EQ(d.phases.size(), 2u);
  // Spans: 10 ms (2 unaccounted) and max(20, 30) = 30 ms (none unaccounted): 40 ms in all.
  EXPECT_EQ(d.phases[0].phase, "forward");
  EXPECT_NEAR(d.phases[0].share, 24.0 / 40.0, 1e-9);
  EXPECT_NEAR(d.phases[1].share, 14.0 / 40.0, 1e-9);
  EXPECT_NEAR(d.unaccounted_share, 2.0 / 40.0, 1e-9);
  EXPECT_NEAR(d.phases[0].share + d.phases[1].share + d.unaccounted_share, 1.0, 1e-12);
  ASSERT_TRUE(d.unaccounted_median_ms);
  EXPECT_NEAR(*d.unaccounted_median_ms, 1.0, 1e-9);  // the median of 2 and 0
  EXPECT_NEAR(d.phases[0].median_ms, 12.0, 1e-9);    // the median of 4 and 20
}

// One ranking everywhere (issue 38): by the median per iteration where every row has one, else
// by the total; layers by their median, else their mean, slowest first.
TEST(Rankings, OpsAndLayersRankByTheMedianPerIterationWhereStored) {
  using ts::store::LayerRow;
  using ts::store::OpSummaryRow;
  const std::vector<OpSummaryRow> rows = {{"cpu", "relu", 30, 120'000'000, 0, 0, 0, 0, 0, 24'000},
                                          {"cpu", "conv", 30, 15'000'000, 0, 0, 0, 0, 0, 500'000},
                                          {"cuda:0", "k", 30, 90'000'000, 0, 0, 0, 0, 0, -1}};
  const auto ops = op_totals(rows, false);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].name, "conv");  // 0.5 ms a typical iteration against relu's 0.024
  ASSERT_TRUE(ops[0].median_ms_per_iteration);
  EXPECT_DOUBLE_EQ(*ops[0].median_ms_per_iteration, 0.5);
  EXPECT_NEAR(ops[1].fraction, 120.0 / 135.0, 1e-12);  // shares stay shares of the total
  // One row without a median (a v6 file's): the total decides, for all of that device's rows.
  auto mixed = rows;
  mixed[1].median_per_iteration_ns = -1;
  EXPECT_EQ(op_totals(mixed, false)[0].name, "relu");
  // Store rows, as the viewer ranks them: the CPU's by median, then the GPU's by total.
  auto viewer_rows = rows;
  rank_op_rows(viewer_rows);
  EXPECT_EQ(viewer_rows[0].name, "conv");
  EXPECT_EQ(viewer_rows[1].name, "relu");
  EXPECT_EQ(viewer_rows[2].name, "k");

  std::vector<LayerRow> layers = {
      {"a", "", 1, 900, 100, 0, 0}, {"b", "", 1, 300, 300, 0, 0}, {"c", "", 1, 50, 50, 0, 0}};
  layers[0].median_per_iteration_ns = 200;  // a's mean was inflated by outliers
  layers[1].median_per_iteration_ns = 600;
  layers[2].median_per_iteration_ns = 100;
  rank_layer_rows(layers);
  EXPECT_EQ(layers[0].layer, "b");
  EXPECT_EQ(layers[1].layer, "a");
  EXPECT_EQ(layers[2].layer, "c");
  std::vector<LayerTotal> totals = {{"a", 0.9, 0.1, 0, 0, 0.2}, {"b", 0.3, 0.3, 0, 0, std::nullopt}};
  EXPECT_EQ(slowest_first(totals)[0].layer, "b");  // its mean (0.6) against a's median (0.2)
}

// Slow iterations are said where they are (issue 38): Tukey's far-out fence over the timed ones.
TEST(RunDigest, IterationsFarSlowerThanTheRestAreCounted) {
  std::vector<double> ms(28, 10.0);
  for (size_t i = 0; i < ms.size(); ++i) ms[i] += 0.1 * static_cast<double>(i % 5);  // 10.0-10.4
  EXPECT_FALSE(iteration_outliers(ms));                                              // none beyond the fence
  ms.push_back(45.0);
  ms.push_back(23.0);
  const auto o = iteration_outliers(ms);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->count, 2u);
  EXPECT_EQ(o->of, 30u);
  EXPECT_DOUBLE_EQ(o->slowest_ms, 45.0);
  EXPECT_GT(o->fence_ms, 10.4);
  EXPECT_LT(o->fence_ms, 23.0);
  EXPECT_FALSE(iteration_outliers({10, 10, 10, 100}));  // too few to have quartiles worth the name
}
