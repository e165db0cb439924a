// Schema v4 (distribution): one run with N ranks, per-rank records, the communication tables,
// the v3 -> v4 migration, and import copying all of it.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "store/import.h"
#include "store/open.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/writer.h"
#include "tests/store/raw_sqlite.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::store;
using ts::store::test_support::Raw;

namespace {

constexpr std::optional<int64_t> kAllRanks = std::nullopt;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct Dir {
  ts::testing::ScratchDir scratch{"ts_dist_store"};
  fs::path operator/(const std::string& name) const { return scratch.path() / name; }
};

RunInfo dp_run(int64_t ranks, int64_t batch_size = 32) {
  RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cpu";
  info.batch_size = batch_size;
  info.iterations = 4;
  info.started_at = "2026-12-01T00:00:00Z";
  info.ranks = ranks;
  return info;
}

// Rank r's records: everything at times offset by r * 1000 so rows of different ranks interleave
// in nothing but their rank.
struct RankRows {
  std::vector<IterationRow> iterations;
  std::vector<PhaseRow> phases;
  std::vector<EventRow> events;
  std::vector<MemoryPoint> memory;
  std::vector<MemoryPeakRow> peaks;
  std::vector<MetricRow> metrics;
  std::vector<SampleRow> samples;
};

RankRows rows_of(int64_t r) {
  const int64_t t = 1000 * r;
  RankRows x;
  x.iterations = {{1, false, t + 100, t + 200, 32, 1.5 + r, r}, {0, true, t + 0, t + 90, 32, 2.5 + r, r}};
  x.phases = {{1, "backward", t + 150, t + 190, r}, {1, "forward", t + 100, t + 150, r}};
  x.events = {{t + 150, t + 190, "backward", "", "phase", "none", 1, 0, r},
              {t + 100, t + 200, "iteration", "", "iteration", "none", 1, 0, r},
              {t + 100, t + 150, "forward", "", "phase", "none", 1, 0, r},
              {t + 110, t + 120, "conv2d", "conv1", "op", "forward", 1, 2, r}};
  x.memory = {{t + 20, "activations", 100 + r, r}, {t + 10, "weights", 50 + r, r}};
  x.peaks = {{"activations", 4096 + r, t + 20, r}};
  x.metrics = {{"throughput", 100.0 + r, "samples/s", -1, r}};
  x.samples = {{t + 5, "rss_bytes", 1e6 + r, r}};
  return x;
}

void write_rank(Writer& w, int64_t run, const RankRows& x) {
  w.add_iterations(run, x.iterations);
  w.add_phases(run, x.phases);
  w.add_events(run, x.events);
  w.add_memory_timeline(run, x.memory);
  w.add_memory_peak(run, x.peaks);
  w.add_metrics(run, x.metrics);
  w.add_samples(run, x.samples);
}

const std::vector<CollectiveRow> kCollectives = {
    {1, 1, 7, "all_reduce", "bucket 1", 1 << 20, 1160, 1180},
    {0, 1, 7, "all_reduce", "bucket 0", 1 << 22, 170, 185},
    {0, 1, 7, "all_reduce", "bucket 1", 1 << 20, 160, 180},
    {1, -1, 0, "broadcast", "parameters", 4096, 1001, 1002},
    {0, -1, 0, "barrier", "", 0, 1, 3},
};
const std::vector<CommOpRow> kCommOps = {
    {1, "mpi", "all_reduce", 1 << 20, 2, 4, 80, 20.0, 18, 22, 52.4288, 52.4288},
    {0, "mpi", "broadcast", 4096, 2, 1, 2, 2.0, 2, 2, 2.048, 2.048},
    {0, "mpi", "all_reduce", 1 << 22, 2, 4, 60, 15.0, 14, 16, 279.62, 279.62},
    {0, "mpi", "all_reduce", 1 << 20, 2, 4, 80, 20.0, 19, 21, 52.4288, 52.4288},
};
const std::vector<RankBreakdownRow> kBreakdown = {
    {1, 1, 1100, 1200, 80, 30, 20, 10, 10, 5},
    {0, 2, 200, 300, 70, 40, 25, 15, 15, 8},
    {0, 1, 100, 200, 75, 35, 30, 5, 20, 3},
};
const std::vector<CollectiveBenchRow> kBench = {
    {"mpi", "all_reduce", 1 << 20, 4, 50, 1.5e5, 6.99, 10.49, 140'000, 170'000},
    {"mpi", "all_reduce", 1024, 4, 100, 5e3, 0.2048, 0.3072, 4'500, 6'000},
};

// A v4 run with three ranks (rank 2 has events only) and every communication table.
int64_t write_dp_run(Writer& w) {
  const int64_t run = w.begin_run(dp_run(3));
  write_rank(w, run, rows_of(0));
  write_rank(w, run, rows_of(1));
  w.add_events(run, std::vector<EventRow>{{2500, 2600, "gemm", "fc", "op", "forward", 1, 1, 2}});
  w.add_collectives(run, kCollectives);
  w.add_comm_ops(run, kCommOps);
  w.add_rank_breakdown(run, kBreakdown);
  w.add_collective_bench(run, kBench);
  return run;
}

}  // namespace

TEST(StoreRanks, RunRowCarriesRanksAndGlobalBatchSize) {
  Dir dir;
  const fs::path db = dir / "runs.db";
  int64_t four = 0, given = 0, single = 0;
  {
    Writer w(db);
    four = w.begin_run(dp_run(4, 32));  // global_batch_size 0: batch_size * ranks
    RunInfo explicit_global = dp_run(2, 32);
    explicit_global.global_batch_size = 48;
    given = w.begin_run(explicit_global);
    RunInfo plain;
    plain.workload = "mlp";
    plain.batch_size = 16;
    single = w.begin_run(plain);
  }
  Reader r(db);
  EXPECT_EQ(r.run(four)->ranks, 4);
  EXPECT_EQ(r.run(four)->global_batch_size, 128);
  EXPECT_EQ(r.run(given)->ranks, 2);
  EXPECT_EQ(r.run(given)->global_batch_size, 48);
  EXPECT_EQ(r.run(single)->ranks, 1);
  EXPECT_EQ(r.run(single)->global_batch_size, 16);
  EXPECT_EQ(r.runs().at(0).global_batch_size, 128);
}

TEST(StoreRanks, PerRankRecordsRoundTripAndRankZeroIsTheDefault) {
  Dir dir;
  const fs::path db = dir / "runs.db";
  int64_t run = 0;
  {
    Writer w(db);
    run = write_dp_run(w);
  }
  Reader r(db);

  // Default: rank 0 only, exactly as a single-process run reads.
  const auto it0 = r.iterations(run);
  ASSERT_EQ(it0.size(), 2u);
  EXPECT_EQ(it0[0].index, 0);
  EXPECT_EQ(it0[0].start_ns, 0);
  EXPECT_DOUBLE_EQ(it0[1].loss, 1.5);
  EXPECT_EQ(it0[1].rank, 0);
  EXPECT_EQ(r.iteration_count(run), 2);
  const auto it1 = r.iterations(run, 1);
  ASSERT_EQ(it1.size(), 2u);
  EXPECT_EQ(it1[1].start_ns, 1100);
  EXPECT_DOUBLE_EQ(it1[1].loss, 2.5);
  EXPECT_EQ(it1[1].rank, 1);
  const auto it_all = r.iterations(run, kAllRanks);
  ASSERT_EQ(it_all.size(), 4u);
  EXPECT_EQ(it_all[0].rank, 0);  // by rank, then index
  EXPECT_EQ(it_all[1].rank, 0);
  EXPECT_EQ(it_all[1].index, 1);
  EXPECT_EQ(it_all[2].rank, 1);
  EXPECT_EQ(it_all[2].index, 0);
  EXPECT_EQ(r.iteration_count(run, kAllRanks), 4);
  EXPECT_EQ(r.iteration_count(run, 2), 0);
  EXPECT_TRUE(r.iterations(run, 7).empty());

  const auto ph = r.phases(run);
  ASSERT_EQ(ph.size(), 2u);
  EXPECT_EQ(ph[0].phase, "forward");
  EXPECT_EQ(ph[0].start_ns, 100);
  const auto ph_all = r.phases(run, kAllRanks);
  ASSERT_EQ(ph_all.size(), 4u);
  EXPECT_EQ(ph_all[2].rank, 1);
  EXPECT_EQ(ph_all[2].phase, "forward");
  EXPECT_EQ(ph_all[3].end_ns, 1190);

  const auto ev0 = r.events(run);
  ASSERT_EQ(ev0.size(), 4u);
  EXPECT_EQ(ev0[0].name, "iteration");  // enclosing first
  EXPECT_EQ(ev0[0].start_ns, 100);
  EXPECT_EQ(ev0[2].name, "conv2d");
  EXPECT_EQ(ev0[2].thread, 2);
  for (const auto& e : ev0) EXPECT_EQ(e.rank, 0);
  const auto ev1 = r.events(run, kMin, kMax, -1, 1);
  ASSERT_EQ(ev1.size(), 4u);
  EXPECT_EQ(ev1[0].start_ns, 1100);
  EXPECT_EQ(ev1[0].rank, 1);
  const auto ev2 = r.events(run, kMin, kMax, -1, 2);
  ASSERT_EQ(ev2.size(), 1u);
  EXPECT_EQ(ev2[0].name, "gemm");
  EXPECT_EQ(ev2[0].layer, "fc");
  EXPECT_EQ(ev2[0].rank, 2);
  const auto ev_all = r.events(run, kMin, kMax, -1, kAllRanks);
  ASSERT_EQ(ev_all.size(), 9u);
  EXPECT_EQ(ev_all[3].rank, 0);
  EXPECT_EQ(ev_all[4].rank, 1);
  EXPECT_EQ(ev_all[4].name, "iteration");
  EXPECT_EQ(ev_all[8].rank, 2);
  // Windows and paging, per rank and across ranks (the limit runs over ranks in order).
  const auto window1 = r.events(run, 1105, 1160, -1, 1);
  ASSERT_EQ(window1.size(), 2u);
  EXPECT_EQ(window1[0].name, "conv2d");
  EXPECT_EQ(window1[1].name, "backward");
  EXPECT_TRUE(r.events(run, 1105, 1160).empty());  // rank 0 has nothing there
  const auto page = r.events(run, 100, kMax, 6, kAllRanks);
  ASSERT_EQ(page.size(), 6u);
  EXPECT_EQ(page[3].rank, 0);
  EXPECT_EQ(page[4].rank, 1);
  EXPECT_EQ(page[5].start_ns, 1100);
  EXPECT_EQ(page[5].name, "forward");
  const auto window_all = r.events(run, 140, 2550, -1, kAllRanks);
  ASSERT_EQ(window_all.size(), 6u);  // rank 0's backward; rank 1's four; rank 2's gemm
  EXPECT_EQ(window_all[0].name, "backward");
  EXPECT_EQ(window_all[5].name, "gemm");
  EXPECT_EQ(r.event_count(run), 4);
  EXPECT_EQ(r.event_count(run, 2), 1);
  EXPECT_EQ(r.event_count(run, kAllRanks), 9);
  const std::vector<std::pair<int64_t, int64_t>> counts = {{0, 4}, {1, 4}, {2, 1}};
  EXPECT_EQ(r.event_counts_by_rank(run), counts);
  EXPECT_EQ(r.ranks_present(run), (std::vector<int64_t>{0, 1, 2}));

  const auto mem0 = r.memory_timeline(run);
  ASSERT_EQ(mem0.size(), 2u);
  EXPECT_EQ(mem0[0].category, "weights");
  EXPECT_EQ(mem0[0].live_bytes, 50);
  const auto mem_all = r.memory_timeline(run, kAllRanks);
  ASSERT_EQ(mem_all.size(), 4u);
  EXPECT_EQ(mem_all[2].rank, 1);
  EXPECT_EQ(mem_all[2].t_ns, 1010);
  EXPECT_EQ(mem_all[3].live_bytes, 101);
  const auto peaks1 = r.memory_peak(run, 1);
  ASSERT_EQ(peaks1.size(), 1u);
  EXPECT_EQ(peaks1[0].bytes, 4097);
  EXPECT_EQ(peaks1[0].rank, 1);
  EXPECT_EQ(r.memory_peak(run).at(0).bytes, 4096);
  EXPECT_EQ(r.memory_peak(run, kAllRanks).size(), 2u);
  const auto me = r.metrics(run, kAllRanks);
  ASSERT_EQ(me.size(), 2u);
  EXPECT_DOUBLE_EQ(me[0].value, 100.0);
  EXPECT_DOUBLE_EQ(me[1].value, 101.0);
  EXPECT_EQ(me[1].rank, 1);
  ASSERT_EQ(r.metrics(run).size(), 1u);
  EXPECT_DOUBLE_EQ(r.metrics(run)[0].value, 100.0);
  const auto sa = r.samples(run, 1);
  ASSERT_EQ(sa.size(), 1u);
  EXPECT_EQ(sa[0].t_ns, 1005);
  EXPECT_DOUBLE_EQ(sa[0].value, 1e6 + 1);
  EXPECT_EQ(r.samples(run, kAllRanks).size(), 2u);
}

TEST(StoreRanks, CommunicationTablesRoundTrip) {
  Dir dir;
  const fs::path db = dir / "runs.db";
  int64_t run = 0, other = 0;
  {
    Writer w(db);
    run = write_dp_run(w);
    other = w.begin_run(dp_run(1));
    EXPECT_THROW(w.add_collectives(run + 10, kCollectives), StoreError);  // no such run
  }
  Reader r(db);
  const auto all = r.collectives(run);  // every rank by default
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].collective, "barrier");  // rank 0 by start, then rank 1
  EXPECT_EQ(all[1].label, "bucket 1");
  EXPECT_EQ(all[1].start_ns, 160);
  EXPECT_EQ(all[2].label, "bucket 0");
  EXPECT_EQ(all[2].bytes, 1 << 22);
  EXPECT_EQ(all[2].end_ns, 185);
  EXPECT_EQ(all[2].thread, 7);
  EXPECT_EQ(all[2].iteration, 1);
  EXPECT_EQ(all[3].rank, 1);
  EXPECT_EQ(all[3].collective, "broadcast");
  EXPECT_EQ(all[3].label, "parameters");
  EXPECT_EQ(all[4].start_ns, 1160);
  const auto one = r.collectives(run, 1);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0].iteration, -1);
  EXPECT_EQ(one[1].bytes, 1 << 20);
  EXPECT_TRUE(r.collectives(run, 5).empty());
  EXPECT_TRUE(r.collectives(other).empty());

  const auto ops = r.comm_ops(run);  // by rank, collective, bytes
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].collective, "all_reduce");
  EXPECT_EQ(ops[0].bytes, 1 << 20);
  EXPECT_EQ(ops[0].min_ns, 19);
  EXPECT_EQ(ops[1].bytes, 1 << 22);
  EXPECT_EQ(ops[1].backend, "mpi");
  EXPECT_EQ(ops[1].ranks, 2);
  EXPECT_EQ(ops[1].count, 4);
  EXPECT_EQ(ops[1].total_ns, 60);
  EXPECT_DOUBLE_EQ(ops[1].mean_ns, 15.0);
  EXPECT_EQ(ops[1].max_ns, 16);
  EXPECT_DOUBLE_EQ(ops[1].algbw_gbps, 279.62);
  EXPECT_DOUBLE_EQ(ops[1].busbw_gbps, 279.62);
  EXPECT_EQ(ops[2].collective, "broadcast");
  EXPECT_EQ(ops[3].rank, 1);
  EXPECT_EQ(ops[3].min_ns, 18);

  const auto bd = r.rank_breakdown(run);  // by rank, iteration
  ASSERT_EQ(bd.size(), 3u);
  EXPECT_EQ(bd[0].iteration, 1);
  EXPECT_EQ(bd[0].compute_ns, 75);
  EXPECT_EQ(bd[0].comm_ns, 35);
  EXPECT_EQ(bd[0].overlap_ns, 30);
  EXPECT_EQ(bd[0].exposed_comm_ns, 5);
  EXPECT_EQ(bd[0].idle_ns, 20);
  EXPECT_EQ(bd[0].backward_wait_ns, 3);
  EXPECT_EQ(bd[1].iteration, 2);
  EXPECT_EQ(bd[2].rank, 1);
  EXPECT_EQ(bd[2].start_ns, 1100);
  EXPECT_EQ(bd[2].end_ns, 1200);

  const auto bench = r.collective_bench(run);  // insertion order
  ASSERT_EQ(bench.size(), 2u);
  EXPECT_EQ(bench[0].bytes, 1 << 20);
  EXPECT_EQ(bench[0].ranks, 4);
  EXPECT_EQ(bench[0].iterations, 50);
  EXPECT_DOUBLE_EQ(bench[0].time_ns, 1.5e5);
  EXPECT_DOUBLE_EQ(bench[0].algbw_gbps, 6.99);
  EXPECT_DOUBLE_EQ(bench[0].busbw_gbps, 10.49);
  EXPECT_EQ(bench[0].min_time_ns, 140'000);
  EXPECT_EQ(bench[0].max_time_ns, 170'000);
  EXPECT_EQ(bench[1].bytes, 1024);
  EXPECT_EQ(bench[1].collective, "all_reduce");

  // Deleting the run takes every new table's rows with it.
  { Writer(db).delete_run(run); }
  Raw raw(db);
  for (const char* table : {"collectives", "comm_ops", "rank_breakdown", "collective_bench", "events", "iterations"})
    EXPECT_EQ(raw.integer(std::string("SELECT count(*) FROM ") + table), 0) << table;
}

TEST(StoreRanks, FlushStreamsCollectivesWithTheRest) {
  Dir dir;
  const fs::path db = dir / "runs.db";
  Writer w(db);
  const int64_t run = w.begin_run(dp_run(2));
  RunFlush f;
  EXPECT_TRUE(f.empty());
  f.collectives.push_back({1, 0, 3, "all_reduce", "bucket 0", 256, 40, 60});
  EXPECT_FALSE(f.empty());  // collectives alone are something to flush
  f.iterations.push_back({0, false, 0, 100, 8, 1.0, 1});
  f.events.push_back({0, 100, "iteration", "", "iteration", "none", 0, 0, 1});
  f.heartbeat_ms = 4242;
  w.flush(run, f);
  {
    Writer::Transaction tx(w);  // rolled back: its collectives with everything else
    RunFlush g;
    g.collectives.push_back({0, 1, 3, "all_reduce", "bucket 0", 256, 140, 160});
    w.flush(run, g);
  }
  Reader r(db);
  const auto c = r.collectives(run);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].rank, 1);
  EXPECT_EQ(c[0].thread, 3);
  EXPECT_EQ(c[0].label, "bucket 0");
  EXPECT_EQ(c[0].bytes, 256);
  EXPECT_EQ(c[0].start_ns, 40);
  EXPECT_EQ(r.run(run)->heartbeat_ms, 4242);
  EXPECT_TRUE(r.iterations(run).empty());  // rank 1's, not rank 0's
  EXPECT_EQ(r.iterations(run, 1).size(), 1u);
  EXPECT_EQ(r.ranks_present(run), (std::vector<int64_t>{1}));
}

TEST(StoreRanks, ReplacingOneRanksMemoryTimelineKeepsTheOthers) {
  Dir dir;
  const fs::path db = dir / "runs.db";
  Writer w(db);
  const int64_t run = w.begin_run(dp_run(2));
  w.add_memory_timeline(run, rows_of(0).memory);
  w.add_memory_timeline(run, rows_of(1).memory);
  w.replace_memory_timeline(run, std::vector<MemoryPoint>{{1005, "weights", 9, 1}}, 1);
  {
    Reader r(db);
    EXPECT_EQ(r.memory_timeline(run).size(), 2u);
    const auto one = r.memory_timeline(run, 1);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].live_bytes, 9);
  }
  w.replace_memory_timeline(run, std::vector<MemoryPoint>{{7, "weights", 3}});  // every rank's
  Reader r(db);
  const auto all = r.memory_timeline(run, kAllRanks);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].live_bytes, 3);
  EXPECT_EQ(all[0].rank, 0);
}

// Per-rank reads go through indexes that lead with (run_id, rank).
TEST(StoreRanks, PerRankQueriesUseTheRankIndexes) {
  Dir dir;
  const fs::path db = dir / "runs.db";
  { Writer w(db); }
  Raw raw(db);
  EXPECT_NE(raw.plan("SELECT * FROM events WHERE run_id = 1 AND rank = 1 AND start_ns BETWEEN 5 AND 9 "
                     "ORDER BY start_ns, end_ns DESC, id")
                .find("events_run_rank_start (run_id=? AND rank=? AND start_ns>? AND start_ns<?)"),
            std::string::npos)
      << raw.plan("SELECT * FROM events WHERE run_id = 1 AND rank = 1 AND start_ns BETWEEN 5 AND 9");
  EXPECT_NE(raw.plan("SELECT * FROM iterations WHERE run_id = 1 AND rank = 1 ORDER BY idx, id")
                .find("iterations_run_rank (run_id=? AND rank=?)"),
            std::string::npos);
  EXPECT_NE(raw.plan("SELECT * FROM collectives WHERE run_id = 1 AND rank = 1 ORDER BY start_ns, id")
                .find("collectives_run_rank_start (run_id=? AND rank=?)"),
            std::string::npos);
  EXPECT_NE(raw.plan("SELECT * FROM memory_timeline WHERE run_id = 1 AND rank = 0 ORDER BY t_ns, id")
                .find("memory_timeline_run_rank (run_id=? AND rank=?)"),
            std::string::npos);
}

// A v3 file (made with the v3 DDL): read as it is (every row rank 0's, one rank, no
// communication), then migrated to v4 by a writer keeping every row as rank 0's.
TEST(StoreRanks, AVersionThreeFileIsReadAndMigratedAsRankZero) {
  Dir dir;
  const fs::path db = dir / "v3.db";
  {
    Raw raw(db);
    raw.exec(std::string(detail::migration_sql(0)) + std::string(detail::migration_sql(1)) +
             std::string(detail::migration_sql(2)));
    raw.exec("PRAGMA user_version = 3; PRAGMA application_id = " + std::to_string(kApplicationId));
    raw.exec(
        "INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
        "parameter_count, started_at, command_line, config_json, status, host, pid) VALUES ('resnet50', 'tiny', 'cpu', "
        "8, 2, 1, 1, 1, 1, 100, '2026-11-22T00:00:00Z', 'trainscope run', '{}', 'completed', 'box', 77);"
        "INSERT INTO strings (id, value) VALUES (1, 'iteration'), (2, ''), (3, 'none'), (4, 'conv2d'), (5, 'op'), "
        "(6, 'forward'), (7, 'weights');"
        "INSERT INTO iterations (run_id, idx, warmup, start_ns, end_ns, samples, loss) VALUES (1, 0, 1, 0, 90, 8, "
        "3.0), "
        "(1, 1, 0, 100, 200, 8, 2.0);"
        "INSERT INTO phases (run_id, iteration, phase, start_ns, end_ns) VALUES (1, 1, 'forward', 100, 150);"
        "INSERT INTO events (run_id, start_ns, end_ns, name_id, layer_id, kind_id, pass_id, iteration, thread) "
        "VALUES (1, 100, 200, 1, 2, 1, 3, 1, 0), (1, 110, 120, 4, 2, 5, 6, 1, 2);"
        "INSERT INTO memory_timeline (run_id, t_ns, category_id, live_bytes) VALUES (1, 10, 7, 64);"
        "INSERT INTO memory_peak (run_id, category, bytes, t_ns) VALUES (1, 'weights', 64, 10);"
        "INSERT INTO metrics (run_id, name, value, unit, iteration) VALUES (1, 'throughput', 80.0, 'samples/s', -1);"
        "INSERT INTO samples (run_id, t_ns, name, value) VALUES (1, 5, 'rss_bytes', 1e6);");
  }
  const auto check_rows = [](Reader& r) {
    const auto run = r.run(1);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->ranks, 1);
    EXPECT_EQ(run->global_batch_size, 8);  // = batch_size
    EXPECT_EQ(run->host, "box");
    ASSERT_EQ(r.iterations(1).size(), 2u);
    EXPECT_DOUBLE_EQ(r.iterations(1)[1].loss, 2.0);
    EXPECT_EQ(r.iterations(1)[1].rank, 0);
    EXPECT_EQ(r.iterations(1, kAllRanks).size(), 2u);
    EXPECT_TRUE(r.iterations(1, 1).empty());
    EXPECT_EQ(r.iteration_count(1, 1), 0);
    ASSERT_EQ(r.phases(1, kAllRanks).size(), 1u);
    const auto ev = r.events(1, kMin, kMax, -1, kAllRanks);
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[1].name, "conv2d");
    EXPECT_EQ(ev[1].thread, 2);
    EXPECT_EQ(r.events(1, 105, 115).size(), 1u);
    EXPECT_TRUE(r.events(1, kMin, kMax, -1, 1).empty());
    EXPECT_EQ(r.event_count(1), 2);
    EXPECT_EQ(r.event_count(1, 3), 0);
    EXPECT_EQ(r.event_counts_by_rank(1), (std::vector<std::pair<int64_t, int64_t>>{{0, 2}}));
    EXPECT_EQ(r.ranks_present(1), (std::vector<int64_t>{0}));
    EXPECT_EQ(r.memory_timeline(1).at(0).live_bytes, 64);
    EXPECT_EQ(r.memory_peak(1, kAllRanks).at(0).bytes, 64);
    EXPECT_DOUBLE_EQ(r.metrics(1).at(0).value, 80.0);
    EXPECT_EQ(r.samples(1).at(0).t_ns, 5);
    EXPECT_TRUE(r.collectives(1).empty());
    EXPECT_TRUE(r.comm_ops(1).empty());
    EXPECT_TRUE(r.rank_breakdown(1).empty());
    EXPECT_TRUE(r.collective_bench(1).empty());
  };
  {
    Reader r(db);
    EXPECT_EQ(r.schema_version(), 3);
    check_rows(r);
  }
  { Writer w(db); }  // migrates
  {
    Raw raw(db);
    EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);  // v3 -> v4 -> the newest
    EXPECT_EQ(raw.integer("SELECT global_batch_size FROM runs WHERE id = 1"), 8);
    EXPECT_EQ(raw.integer("SELECT ranks FROM runs WHERE id = 1"), 1);
    for (const char* table : {"iterations", "phases", "events", "samples", "metrics", "memory_timeline", "memory_peak"})
      EXPECT_EQ(raw.integer(std::string("SELECT count(*) FROM ") + table + " WHERE rank <> 0"), 0) << table;
    EXPECT_EQ(raw.integer("SELECT count(*) FROM events WHERE rank = 0"), 2);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name = 'events_run_start'"), 0);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name = 'events_run_rank_start'"), 1);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'comm_ops'"), 1);
  }
  {
    Reader r(db);
    EXPECT_EQ(r.schema_version(), kSchemaVersion);
    check_rows(r);
  }
  {
    Writer w(db);  // the migrated run takes rank-1 rows and communication
    w.add_iterations(1, std::vector<IterationRow>{{0, false, 1000, 1100, 8, 1.0, 1}});
    w.add_collectives(1, kCollectives);
  }
  Reader r(db);
  EXPECT_EQ(r.iterations(1).size(), 2u);
  EXPECT_EQ(r.iterations(1, 1).size(), 1u);
  EXPECT_EQ(r.collectives(1).size(), kCollectives.size());
  EXPECT_EQ(r.ranks_present(1), (std::vector<int64_t>{0, 1}));
}

TEST(StoreImport, CopiesEveryRankAndTheCommunicationTables) {
  Dir dir;
  const fs::path from_db = dir / "from.db", to_db = dir / "to.db";
  int64_t run = 0;
  {
    Writer w(from_db);
    run = write_dp_run(w);
    w.finish_run(run, RunStatus::completed, "2026-12-01T00:10:00Z", "");
  }
  int64_t copy = 0;
  {
    Writer to(to_db);
    to.begin_run(dp_run(1));  // something there already: the copy gets a new id
    Reader from(from_db);
    copy = copy_run(from, run, to);
  }
  EXPECT_EQ(copy, 2);
  Reader a(from_db), b(to_db);
  EXPECT_EQ(b.run(copy)->ranks, 3);
  EXPECT_EQ(b.run(copy)->global_batch_size, 96);
  EXPECT_EQ(b.run(copy)->status, RunStatus::completed);
  const auto same_events = [](const std::vector<EventRow>& x, const std::vector<EventRow>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].start_ns != y[i].start_ns || x[i].end_ns != y[i].end_ns || x[i].name != y[i].name ||
          x[i].rank != y[i].rank || x[i].thread != y[i].thread)
        return false;
    return true;
  };
  EXPECT_TRUE(same_events(a.events(run, kMin, kMax, -1, kAllRanks), b.events(copy, kMin, kMax, -1, kAllRanks)));
  EXPECT_EQ(b.event_counts_by_rank(copy), (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {1, 4}, {2, 1}}));
  EXPECT_EQ(b.ranks_present(copy), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(b.iterations(copy, 1).size(), 2u);
  EXPECT_EQ(b.iterations(copy, 1)[1].start_ns, 1100);
  EXPECT_EQ(b.phases(copy, kAllRanks).size(), 4u);
  EXPECT_EQ(b.memory_timeline(copy, 1).size(), 2u);
  EXPECT_EQ(b.memory_peak(copy, 1).at(0).bytes, 4097);
  EXPECT_EQ(b.metrics(copy, kAllRanks).size(), 2u);
  EXPECT_EQ(b.samples(copy, 1).at(0).t_ns, 1005);
  const auto c = b.collectives(copy);
  ASSERT_EQ(c.size(), kCollectives.size());
  EXPECT_EQ(c[2].label, "bucket 0");
  EXPECT_EQ(c[4].rank, 1);
  const auto ops = b.comm_ops(copy);
  ASSERT_EQ(ops.size(), kCommOps.size());
  EXPECT_EQ(ops[1].total_ns, 60);
  EXPECT_DOUBLE_EQ(ops[1].busbw_gbps, 279.62);
  const auto bd = b.rank_breakdown(copy);
  ASSERT_EQ(bd.size(), kBreakdown.size());
  EXPECT_EQ(bd[2].backward_wait_ns, 5);
  const auto bench = b.collective_bench(copy);
  ASSERT_EQ(bench.size(), kBench.size());
  EXPECT_EQ(bench[1].max_time_ns, 6'000);
  // Replacing a run with the copy keeps nothing of the replaced one.
  {
    Writer to(to_db);
    Reader from(from_db);
    EXPECT_EQ(copy_run(from, run, to, copy), copy);
  }
  EXPECT_EQ(Reader(to_db).collectives(copy).size(), kCollectives.size());
  EXPECT_EQ(Reader(to_db).event_count(copy, kAllRanks), 9);
}
