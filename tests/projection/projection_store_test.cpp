// What a projection reads from a db (a one-rank run's phases, gradient markers and sizes), what it
// writes (a run of its own and the ledger's row), and how a measured run finds its inputs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "projection/ledger.h"
#include "projection/link_model.h"
#include "projection/simulate.h"
#include "projection/source_run.h"
#include "store/reader.h"
#include "store/writer.h"

using namespace ts;
using namespace ts::projection;

namespace {

constexpr int64_t kMs = 1'000'000;

class ProjectionStore : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = std::filesystem::temp_directory_path() /
          ("ts_projection_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db");
    std::filesystem::remove(db_);
  }
  void TearDown() override {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db_.string() + suffix);
  }

  // resnet50 tiny on the CPU, batch 4, one thread per rank: what source and measured runs share.
  static store::RunInfo resnet50_tiny(int64_t ranks) {
    store::RunInfo info;
    info.workload = "resnet50";
    info.preset = "tiny";
    info.device = "cpu";
    info.batch_size = 4;
    info.threads = 1;
    info.ranks = ranks;
    return info;
  }

  // A one-rank run: a warm-up and two timed iterations of forward 10 ms, backward 100 ms (p1 ready
  // at 30 ms, p0 at 90), optimizer 5 ms; two parameters of 4 MB and 2 MB.
  int64_t source_run(store::Writer& w, const std::string& shard = "", int64_t ranks = 1) {
    store::RunInfo info = resnet50_tiny(ranks);
    info.iterations = 2;
    info.warmup = 1;
    nlohmann::json cfg = {
        {"units", {{"samples", "images"}, {"tokens", ""}, {"batch", "images"}, {"headline", "samples"}}}};
    if (!shard.empty()) cfg["shard"] = shard;
    info.config_json = cfg.dump();
    const int64_t run = w.begin_run(info);
    std::vector<store::IterationRow> its;
    std::vector<store::PhaseRow> phases;
    std::vector<store::EventRow> events;
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t t0 = i * 200 * kMs;
      its.push_back({i, i == 0, t0, t0 + 115 * kMs, 4, 1.0, 0});
      phases.push_back({i, "forward", t0, t0 + 10 * kMs, 0});
      phases.push_back({i, "backward", t0 + 10 * kMs, t0 + 110 * kMs, 0});
      phases.push_back({i, "optimizer", t0 + 110 * kMs, t0 + 115 * kMs, 0});
      events.push_back({t0 + 40 * kMs, t0 + 40 * kMs, "gradient ready", "fc.bias", "marker", "backward", i, 0, 0});
      events.push_back({t0 + 100 * kMs, t0 + 100 * kMs, "gradient ready", "fc.weight", "marker", "backward", i, 0, 0});
      events.push_back({t0 + 1 * kMs, t0 + 3 * kMs, "linear", "fc", "op", "forward", i, 0, 0});
    }
    w.add_iterations(run, its);
    w.add_phases(run, phases);
    w.add_events(run, events);
    const std::vector<store::GradientRow> grads = {{0, 0, "fc.weight", 4'000'000, 0}, {0, 1, "fc.bias", 2'000'000, 0}};
    w.add_gradients(run, grads);
    const std::vector<store::MetricRow> metrics = {{"roofline_memory_bytes", 8e9, "bytes", -1, 0},
                                                   {"roofline_memory_ns", 1e9, "ns", -1, 0}};
    w.add_metrics(run, metrics);
    w.finish_run(run, store::RunStatus::completed, "2026-11-29T00:00:00Z", "");
    return run;
  }

  // A collectives sweep over two hosts: all-reduce at 1 byte per ns plus 50 us.
  int64_t sweep_run(store::Writer& w, const std::string& hosts) {
    store::RunInfo info;
    info.workload = "collectives";
    info.preset = "sweep";
    info.device = "cpu";
    info.ranks = 2;
    const int64_t run = w.begin_run(info);
    std::vector<store::CollectiveBenchRow> rows;
    for (int64_t b : {int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 24}) {
      store::CollectiveBenchRow r;
      r.backend = "mpi";
      r.collective = "all_reduce";
      r.ranks = 2;
      r.bytes = b;
      r.time_ns = r.p50_ns = 50e3 + static_cast<double>(b);
      rows.push_back(r);
    }
    w.add_collective_bench(run, rows);
    const std::vector<store::EnvEntry> env = {
        {"rank_hosts", hosts}, {"cpu.logical_cores", "2"}, {"ranks_per_machine", "1"}};
    w.add_environment(run, env);
    w.finish_run(run, store::RunStatus::completed, "2026-11-29T00:00:00Z", "");
    return run;
  }

  // A measured 2-rank all-reduce run over `hosts`, median iteration 130 ms.
  int64_t measured_run(store::Writer& w, const std::string& hosts, nlohmann::json distributed) {
    store::RunInfo info = resnet50_tiny(2);
    info.iterations = 1;
    info.config_json = nlohmann::json{{"distributed", distributed}}.dump();
    const int64_t run = w.begin_run(info);
    const std::vector<store::IterationRow> its = {{0, true, 0, 500 * kMs, 4, 1.0, 0},
                                                  {1, false, 0, 130 * kMs, 4, 1.0, 0}};
    w.add_iterations(run, its);
    const std::vector<store::EnvEntry> env = {{"rank_hosts", hosts}, {"ranks_per_machine", "1"}};
    w.add_environment(run, env);
    w.finish_run(run, store::RunStatus::completed, "2026-11-29T00:00:00Z", "");
    return run;
  }

  std::filesystem::path db_;
};

nlohmann::json allreduce_config() {
  return {{"strategy", "data_parallel_allreduce"}, {"bucket_mb", 25.0}, {"overlap", true}, {"bucket_order", "arrival"}};
}

}  // namespace

TEST_F(ProjectionStore, ASourceRunIsReadAsItsPhasesReadinessAndSizes) {
  int64_t run = 0;
  {
    store::Writer w(db_);
    run = source_run(w, "0/2");
  }
  store::Reader r(db_);
  const SourceRun s = read_source(r, run, true);
  ASSERT_EQ(s.iterations.size(), 2u);  // the warm-up left out
  EXPECT_EQ(s.iterations[0].index, 1);
  EXPECT_EQ(s.iterations[0].span_ns, 115 * kMs);
  ASSERT_EQ(s.iterations[0].phases.size(), 3u);
  const SourcePhase& back = s.iterations[0].phases[1];
  EXPECT_EQ(back.name, "backward");
  EXPECT_EQ(back.group, 0);
  ASSERT_EQ(back.ready.size(), 2u);
  EXPECT_EQ(back.ready[0], (std::pair<int, int64_t>{1, 30 * kMs}));  // fc.bias first
  EXPECT_EQ(back.ready[1], (std::pair<int, int64_t>{0, 90 * kMs}));
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].bytes, (std::vector<int64_t>{4'000'000, 2'000'000}));
  EXPECT_EQ(s.groups[0].arrival, (std::vector<int>{1, 0}));  // the warm-up's order
  EXPECT_DOUBLE_EQ(s.memory_gbps, 8.0);
  EXPECT_EQ(s.shard_rank, 0);
  EXPECT_EQ(s.shard_ranks, 2);
  // The forward's first use of each parameter: its layer's first op, 1 ms in.
  const auto& uses = s.iterations[0].phases[0].first_use;
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].second, 1 * kMs);
}

TEST_F(ProjectionStore, RunsThatCannotBeProjectedAreRefusedSayingWhy) {
  int64_t multi = 0, bare = 0;
  {
    store::Writer w(db_);
    multi = measured_run(w, "h1 x1, h2 x1", allreduce_config());
    store::RunInfo info;
    info.workload = "resnet50";
    info.trace = true;
    bare = w.begin_run(info);
    w.finish_run(bare, store::RunStatus::completed, "2026-11-29T00:00:00Z", "");
  }
  store::Reader r(db_);
  const auto why = [&](int64_t run) {
    try {
      read_source(r, run);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("nothing");
  };
  EXPECT_NE(why(multi).find("ran 2 ranks"), std::string::npos) << why(multi);
  EXPECT_NE(why(bare).find("no gradients"), std::string::npos) << why(bare);
  EXPECT_NE(why(99).find("no run 99"), std::string::npos);
}

TEST_F(ProjectionStore, AProjectionIsStoredAsARunWithItsLedgerRow) {
  int64_t src = 0, sweep = 0;
  {
    store::Writer w(db_);
    src = source_run(w);
    sweep = sweep_run(w, "h1 x1, h2 x1");
  }
  int64_t run = 0;
  {
    store::Reader r(db_);
    const SourceRun s = read_source(r, src);
    const LinkModel link = load_link_model(r, sweep);
    EXPECT_DOUBLE_EQ(link.sweep_cores_per_rank, 2.0);
    Knobs k;
    const Projection p = project(s, link, k);
    store::Writer w(db_);
    run = store_projection(w, s, p, {sweep, 0, -1, "1gbit", "trainscope project"});
  }
  store::Reader r(db_);
  const auto row = r.projection_of(run);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->source_run_id, src);
  EXPECT_EQ(row->sweep_run_id, sweep);
  EXPECT_EQ(row->strategy, "allreduce");
  EXPECT_EQ(row->ranks, 2);
  EXPECT_FALSE(row->error);
  // 6 MB in one bucket ready at 90 ms: 50 us + 6 ms from 90 ms on, within the backward: 115 ms.
  EXPECT_NEAR(row->projected_ns, 115 * kMs, 0.1 * kMs);
  const auto info = r.run(run);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->framework, "projection");
  EXPECT_EQ(info->ranks, 2);
  EXPECT_EQ(r.iterations(run, std::nullopt).size(), 4u);  // 2 iterations x 2 ranks
  EXPECT_EQ(r.rank_breakdown(run).size(), 4u);
  bool throughput = false;
  for (const auto& m : r.metrics(run)) throughput = throughput || m.name == "throughput_median";
  EXPECT_TRUE(throughput);
}

TEST_F(ProjectionStore, AMeasuredRunFindsItsInputsAndStoresItsError) {
  int64_t whole = 0, sharded = 0, sweep = 0, other_hosts = 0, measured = 0, cross = 0, asked = 0;
  {
    store::Writer w(db_);
    whole = source_run(w);
    sharded = source_run(w, "0/2");
    source_run(w, "1/2");  // another rank's shard: never the source
    sweep = sweep_run(w, "h1 x1, h2 x1");
    other_hosts = sweep_run(w, "h3 x1, h4 x1");
    measured = measured_run(w, "h1 x1, h2 x1", allreduce_config());
    auto cfg = allreduce_config();
    cfg["priority"] = true;
    cross = measured_run(w, "h1 x1, h2 x1", cfg);
    const std::vector<store::MetricRow> taken = {{"dp_cross_barrier", 1, "", -1, 0}};
    w.add_metrics(cross, taken);
    asked = measured_run(w, "h1 x1, h2 x1", cfg);  // asked for cross-barrier, not taken (no metric)
  }
  (void)whole;
  (void)other_hosts;
  {
    store::Reader r(db_);
    const auto m = r.run(measured);
    EXPECT_EQ(find_source(r, *m), sharded);  // rank 0's shard of 2 before the whole data set
    EXPECT_EQ(find_sweep(r, *m), sweep);     // the same hosts
    const auto knobs = knobs_of(r, *m);
    ASSERT_TRUE(knobs.knobs);
    EXPECT_EQ(knobs.knobs->ranks, 2);
    EXPECT_DOUBLE_EQ(knobs.knobs->bucket_mb, 25.0);
    // Cross-barrier as the run took it.
    const auto taken = knobs_of(r, *r.run(cross));
    ASSERT_TRUE(taken.knobs) << taken.why_not;
    EXPECT_TRUE(taken.knobs->priority);
    EXPECT_TRUE(taken.knobs->cross_barrier);
    const auto not_taken = knobs_of(r, *r.run(asked));
    ASSERT_TRUE(not_taken.knobs) << not_taken.why_not;
    EXPECT_FALSE(not_taken.knobs->cross_barrier);
  }
  const LedgerResult res = project_measured(db_, measured, "trainscope run");
  ASSERT_TRUE(res.row) << res.why_not;
  EXPECT_EQ(res.row->measured_run_id, measured);
  ASSERT_TRUE(res.row->error);
  EXPECT_NEAR(res.row->measured_ns, 130 * kMs, 1);
  EXPECT_NEAR(*res.row->error, res.row->projected_ns / (130.0 * kMs) - 1, 1e-12);
  store::Reader r(db_);
  EXPECT_EQ(r.projections_of_measured(measured).size(), 1u);
  const LedgerResult crossed = project_measured(db_, cross, "trainscope run");
  ASSERT_TRUE(crossed.row) << crossed.why_not;
  EXPECT_NE(crossed.row->knobs_json.find("\"cross_barrier\":true"), std::string::npos) << crossed.row->knobs_json;
  const LedgerResult plain = project_measured(db_, asked, "trainscope run");
  ASSERT_TRUE(plain.row) << plain.why_not;
  EXPECT_NE(plain.row->knobs_json.find("\"cross_barrier\":false"), std::string::npos) << plain.row->knobs_json;
}

TEST_F(ProjectionStore, AParameterServersModeIsProjectedAsTheRunTookIt) {
  // Each mode the servers run is the model's (bounded with its staleness); one the model does not
  // know, several servers: none, saying why.
  std::map<std::string, int64_t> runs;
  {
    store::Writer w(db_);
    source_run(w, "0/2");
    sweep_run(w, "h1 x1, h2 x1");
    const nlohmann::json ps{{"strategy", "parameter_server"}, {"servers", 1}, {"chunk_mb", 1.0}};
    for (const std::string mode : {"sync", "async", "eager", "bounded", "hogwild"}) {
      auto cfg = ps;
      cfg["mode"] = mode;
      if (mode == "bounded") cfg["staleness"] = 3;
      runs[mode] = measured_run(w, "h1 x1, h2 x1", cfg);
    }
    auto two = ps;
    two["servers"] = 2;
    runs["two servers"] = measured_run(w, "h1 x1, h2 x1", two);
  }
  store::Reader r(db_);
  for (const std::string mode : {"sync", "async", "eager", "bounded"}) {
    SCOPED_TRACE(mode);
    const auto k = knobs_of(r, *r.run(runs[mode]));
    ASSERT_TRUE(k.knobs) << k.why_not;
    EXPECT_EQ(ts::vocabulary::to_string(k.knobs->ps_mode), mode);
    EXPECT_EQ(k.knobs->staleness, mode == "bounded" ? 3 : 0);
    const LedgerResult res = project_measured(db_, runs[mode], "trainscope run");
    ASSERT_TRUE(res.row) << res.why_not;
    EXPECT_NE(res.row->knobs_json.find("\"ps_mode\":\"" + mode + "\""), std::string::npos) << res.row->knobs_json;
    EXPECT_EQ(res.row->knobs_json.find("staleness") != std::string::npos, mode == "bounded") << res.row->knobs_json;
  }
  const auto unknown = knobs_of(r, *r.run(runs["hogwild"]));
  EXPECT_FALSE(unknown.knobs);
  EXPECT_NE(unknown.why_not.find("'hogwild'"), std::string::npos) << unknown.why_not;
  const auto two = knobs_of(r, *r.run(runs["two servers"]));
  EXPECT_FALSE(two.knobs);
  EXPECT_NE(two.why_not.find("several or dedicated servers"), std::string::npos) << two.why_not;
}

TEST_F(ProjectionStore, AnActorLearnerRunIsReadAsItsLearnersUpdates) {
  // An a3c-like run (its `learners` metric): two learner threads (7 and 9) and the main thread
  // (3); per iteration each learner acts, forwards, backwards and steps (its rmsprop_step ops in
  // the optimizer phase); waiting phases and the main thread's ops are no update's.
  int64_t run = 0;
  {
    store::Writer w(db_);
    store::RunInfo info = resnet50_tiny(1);
    info.workload = "a3c";
    info.iterations = 2;
    info.warmup = 1;
    info.trace = true;
    run = w.begin_run(info);
    std::vector<store::IterationRow> its;
    std::vector<store::EventRow> events;
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t t0 = i * 100 * kMs;
      its.push_back({i, i == 0, t0, t0 + 50 * kMs, 10, 1.0, 0});
      for (const auto& [thread, at] : {std::pair{int64_t{7}, int64_t{0}}, std::pair{int64_t{9}, int64_t{2}}}) {
        const int64_t u = t0 + at * kMs;
        events.push_back({u, u + 10 * kMs, "acting", "", "phase", "", i, thread, 0});
        events.push_back({u + 10 * kMs, u + 20 * kMs, "forward", "", "phase", "", i, thread, 0});
        events.push_back({u + 20 * kMs, u + 35 * kMs, "backward", "", "phase", "", i, thread, 0});
        events.push_back({u + 35 * kMs, u + 40 * kMs, "optimizer", "", "phase", "", i, thread, 0});
        events.push_back({u + 36 * kMs, u + 37 * kMs, "rmsprop_step", "fc", "op", "none", i, thread, 0});
        events.push_back({u + 38 * kMs, u + 39 * kMs, "rmsprop_step", "conv", "op", "none", i, thread, 0});
        events.push_back({u + 40 * kMs, u + 48 * kMs, "waiting", "", "phase", "", i, thread, 0});
      }
      events.push_back({t0 + 1 * kMs, t0 + 2 * kMs, "rmsprop_step", "fc", "op", "none", i, 3, 0});
    }
    std::sort(events.begin(), events.end(),
              [](const store::EventRow& a, const store::EventRow& b) { return a.start_ns < b.start_ns; });
    w.add_iterations(run, its);
    w.add_events(run, events);
    const std::vector<store::GradientRow> grads = {{0, 0, "fc.weight", 2'000'000, 0}};
    w.add_gradients(run, grads);
    const std::vector<store::MetricRow> metrics = {{"learners", 2, "threads", -1, 0}};
    w.add_metrics(run, metrics);
    w.finish_run(run, store::RunStatus::completed, "2026-11-29T00:00:00Z", "");
  }
  store::Reader r(db_);
  const SourceRun s = read_source(r, run, true);
  EXPECT_EQ(s.learners, 2);
  ASSERT_EQ(s.iterations.size(), 2u);  // the timed ones
  for (const auto& it : s.iterations) {
    ASSERT_EQ(it.updates.size(), 2u);
    EXPECT_EQ(it.updates[0].learner, 0);  // thread 7 acted first
    EXPECT_EQ(it.updates[1].learner, 1);
    EXPECT_EQ(it.updates[1].start_ns, 2 * kMs);
    EXPECT_EQ(it.updates[1].end_ns, 42 * kMs);  // to its optimizer phase's end, not its wait's
    EXPECT_EQ(it.updates[0].step_ns, 2 * kMs);  // its own two steps, not the main thread's
  }
}
