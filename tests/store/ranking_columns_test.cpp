// Schema v7: each op's and layer's median time per timed iteration beside the totals (rankings
// by what a typical iteration spends, issue 38); v8: its time in every timed iteration (what
// compare tests culprits on). Written and read back; a v6 file reads -1 and no series (unknown)
// without being migrated, and migrates keeping its rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

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

int64_t write_run(Writer& w) {
  RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cpu";
  const int64_t run = w.begin_run(info);
  const std::vector<OpSummaryRow> ops = {{"cpu", "conv2d", 60, 6'000'000, 100'000, 90'000, 80'000, 900'000, 6'000'000,
                                          180'000, std::vector<int64_t>{170'000, 180'000, 0, 9'000'000'000}}};
  w.add_op_summary(run, ops);
  LayerRow layer{"layer1.0.conv1", "conv2d", 2, 150'000, 50'000, 1024, 576};
  layer.median_per_iteration_ns = 190'000;
  layer.per_iteration_ns = {190'000, 185'000};
  const std::vector<LayerRow> layers = {layer};
  w.add_layers(run, layers);
  return run;
}

}  // namespace

TEST(StoreRankings, MediansPerIterationAreStoredBesideTheTotals) {
  ts::testing::ScratchDir dir("ts_rank_store");
  const fs::path db = dir / "runs.db";
  int64_t run = 0;
  {
    Writer w(db);
    run = write_run(w);
  }
  Reader r(db);
  const auto ops = r.op_summary(run);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].median_per_iteration_ns, 180'000);
  EXPECT_EQ(ops[0].total_ns, 6'000'000);
  const auto layers = r.layers(run);
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0].median_per_iteration_ns, 190'000);
  EXPECT_EQ(layers[0].forward_ns, 150'000);
  // v8: every timed iteration's time, in order (a value past 32 bits included).
  EXPECT_EQ(ops[0].per_iteration_ns, (std::vector<int64_t>{170'000, 180'000, 0, 9'000'000'000}));
  EXPECT_EQ(layers[0].per_iteration_ns, (std::vector<int64_t>{190'000, 185'000}));
}

TEST(StoreRankings, SeriesAreReadBackAsWrittenAndAnythingElseAsNone) {
  EXPECT_EQ(encode_series({}), "");
  EXPECT_EQ(encode_series({1, -2, 30}), "1,-2,30");
  EXPECT_EQ(decode_series("1,-2,30"), (std::vector<int64_t>{1, -2, 30}));
  EXPECT_TRUE(decode_series("").empty());
  for (const char* bad : {"1,,2", "1,x", "1 ,2", ",1", "1,", "99999999999999999999"}) {
    EXPECT_TRUE(decode_series(bad).empty()) << bad;
  }
}

TEST(StoreRankings, AVersionSixFileReadsUnknownAndMigrates) {
  ts::testing::ScratchDir dir("ts_rank_store");
  const fs::path db = dir / "v6.db";
  {
    Raw raw(db);
    std::string ddl;
    for (int v = 0; v < 6; ++v) ddl += std::string(detail::migration_sql(v));
    raw.exec(ddl);
    raw.exec("PRAGMA user_version = 6; PRAGMA application_id = " + std::to_string(kApplicationId));
    raw.exec(
        "INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
        "parameter_count, started_at, command_line, config_json, status) VALUES ('resnet50', 'tiny', 'cpu', 4, 2, 1, "
        "1, 1, 1, 100, '2026-11-22T00:00:00Z', 'trainscope run', '{}', 'completed');"
        "INSERT INTO kernel_summary (run_id, device, name, count, total_ns, mean_ns, median_ns, min_ns, max_ns) "
        "VALUES (1, 'cpu', 'relu', 4, 400, 100, 100, 90, 110);"
        "INSERT INTO layers (run_id, layer, op_types, calls, forward_ns, backward_ns, activation_bytes, "
        "parameter_count) VALUES (1, 'fc', 'linear', 2, 10, 20, 64, 8);");
  }
  {
    Reader r(db);  // never migrates
    EXPECT_EQ(r.schema_version(), 6);
    ASSERT_EQ(r.op_summary(1).size(), 1u);
    EXPECT_EQ(r.op_summary(1)[0].median_per_iteration_ns, -1);
    ASSERT_EQ(r.layers(1).size(), 1u);
    EXPECT_EQ(r.layers(1)[0].median_per_iteration_ns, -1);
    EXPECT_TRUE(r.layers(1)[0].per_iteration_ns.empty());
  }
  int64_t run = 0;
  {
    Writer w(db);  // migrates
    run = write_run(w);
  }
  Reader r(db);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  EXPECT_EQ(r.op_summary(1)[0].median_per_iteration_ns, -1);  // the old row: still unknown
  EXPECT_TRUE(r.op_summary(1)[0].per_iteration_ns.empty());
  EXPECT_TRUE(r.layers(1)[0].per_iteration_ns.empty());
  EXPECT_EQ(r.op_summary(run)[0].median_per_iteration_ns, 180'000);
  EXPECT_EQ(r.layers(run)[0].median_per_iteration_ns, 190'000);
}
