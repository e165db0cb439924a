// Schema v12: the collectives benchmark keeps every timed call. collective_bench rows carry their
// bus factor, p50, p99 and sample count; collective_bench_samples holds each row's calls per rank;
// both read back, are imported, and go with their run. A v11 file reads (the factor its figures
// imply, no percentiles, no calls), imports into a v12 file, and migrates.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
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

RunInfo bench_run() {
  RunInfo info;
  info.workload = "collectives";
  info.preset = "sweep";
  info.device = "cpu";
  info.ranks = 2;
  info.started_at = "2026-12-01T00:00:00Z";
  return info;
}

const std::vector<CollectiveBenchRow> kRows = {
    {"mpi", "all_gather", 4096, 2, 3, 1.5e4, 0.27, 0.135, 9'000, 30'000, 0.5, 12'000.5, 29'700, 6},
    {"mpi", "barrier", 0, 2, 3, 2e3, 0, 0, 1'000, 4'000, 0, 1'500, 3'960, 6},
};
// Written out of the order they read back in (by collective, bytes, rank).
const std::vector<CollectiveBenchSamplesRow> kSamples = {
    {"barrier", 0, 1, {1'000, 2'000, 4'000}},
    {"all_gather", 4096, 1, {30'000, 12'000, 11'000}},
    {"all_gather", 4096, 0, {9'000, 13'001, 15'000}},
    {"barrier", 0, 0, {1'500, 1'500, 2'000}},
};

void expect_rows(const std::vector<CollectiveBenchRow>& got) {
  ASSERT_EQ(got.size(), kRows.size());
  for (size_t i = 0; i < kRows.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].collective, kRows[i].collective);
    EXPECT_EQ(got[i].bytes, kRows[i].bytes);
    EXPECT_DOUBLE_EQ(got[i].time_ns, kRows[i].time_ns);
    EXPECT_EQ(got[i].max_time_ns, kRows[i].max_time_ns);
    EXPECT_DOUBLE_EQ(got[i].bus_factor, kRows[i].bus_factor);
    EXPECT_DOUBLE_EQ(got[i].p50_ns, kRows[i].p50_ns);
    EXPECT_DOUBLE_EQ(got[i].p99_ns, kRows[i].p99_ns);
    EXPECT_EQ(got[i].samples, kRows[i].samples);
  }
}

void expect_samples(const std::vector<CollectiveBenchSamplesRow>& got) {
  const std::vector<CollectiveBenchSamplesRow> want = {kSamples[2], kSamples[1], kSamples[3], kSamples[0]};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].collective, want[i].collective);
    EXPECT_EQ(got[i].bytes, want[i].bytes);
    EXPECT_EQ(got[i].rank, want[i].rank);
    EXPECT_EQ(got[i].time_ns, want[i].time_ns);
  }
}

// A file as trainscope wrote it at v11, with one benchmark row (all-reduce over 4 ranks, bus
// factor 1.5) and the barrier's.
void write_v11(const fs::path& db) {
  Raw raw(db);
  std::string ddl;
  for (int v = 0; v < 11; ++v) ddl += std::string(detail::migration_sql(v));
  raw.exec(ddl);
  raw.exec("PRAGMA user_version = 11; PRAGMA application_id = " + std::to_string(kApplicationId));
  raw.exec(
      "INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
      "parameter_count, started_at, command_line, config_json, status, ranks) VALUES ('collectives', 'sweep', 'cpu', "
      "0, 20, 5, 1, 1, 0, 0, '2026-11-22T00:00:00Z', 'trainscope bench collectives', '{}', 'completed', 4);");
  raw.exec(
      "INSERT INTO collective_bench (run_id, backend, collective, bytes, ranks, iterations, time_ns, algbw_gbps, "
      "busbw_gbps, min_time_ns, max_time_ns) VALUES (1, 'mpi', 'all_reduce', 1048576, 4, 20, 2e5, 5.24288, 7.86432, "
      "190000, 250000), (1, 'mpi', 'barrier', 0, 4, 20, 3e3, 0, 0, 2000, 5000);");
}

}  // namespace

TEST(StoreBenchSamples, RowsAndCallsReadBackAreImportedAndGoWithTheirRun) {
  ts::testing::ScratchDir dir("ts_bench_samples");
  const fs::path db = dir / "b.db", other = dir / "other.db";
  int64_t run = 0;
  {
    Writer w(db);
    run = w.begin_run(bench_run());
    w.add_collective_bench(run, kRows);
    w.add_collective_bench_samples(run, kSamples);
    w.finish_run(run, RunStatus::completed, "2026-12-01T00:05:00Z", "");
  }
  {
    Reader r(db);
    EXPECT_EQ(r.schema_version(), kSchemaVersion);
    expect_rows(r.collective_bench(run));
    expect_samples(r.collective_bench_samples(run));
    EXPECT_TRUE(r.collective_bench_samples(run + 1).empty());
  }
  int64_t copy = 0;
  {
    Writer to(other);
    to.begin_run(bench_run());  // something there already: the copy gets a new id
    Reader from(db);
    copy = copy_run(from, run, to);
  }
  expect_rows(Reader(other).collective_bench(copy));
  expect_samples(Reader(other).collective_bench_samples(copy));
  { Writer(db).delete_run(run); }
  Raw raw(db);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM collective_bench_samples"), 0);
  const std::string plan =
      raw.plan("SELECT * FROM collective_bench_samples WHERE run_id = 1 ORDER BY collective, bytes");
  EXPECT_NE(plan.find("collective_bench_samples_run"), std::string::npos) << plan;
}

TEST(StoreBenchSamples, AVersionElevenFileReadsImportsAndMigrates) {
  ts::testing::ScratchDir dir("ts_bench_samples");
  const fs::path v11 = dir / "v11.db", into = dir / "into.db";
  write_v11(v11);
  const auto check_old_rows = [](const std::vector<CollectiveBenchRow>& rows) {
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_NEAR(rows[0].bus_factor, 1.5, 1e-12) << "busbw / algbw: 2(n-1)/n for 4 ranks";
    EXPECT_EQ(rows[0].p50_ns, -1);
    EXPECT_EQ(rows[0].p99_ns, -1);
    EXPECT_EQ(rows[0].samples, 0);
    EXPECT_EQ(rows[0].max_time_ns, 250'000);
    EXPECT_EQ(rows[1].bus_factor, 0) << "the barrier moves no bytes";
  };
  {
    Reader r(v11);  // never migrates
    EXPECT_EQ(r.schema_version(), 11);
    check_old_rows(r.collective_bench(1));
    EXPECT_TRUE(r.collective_bench_samples(1).empty()) << "before v12 the calls were not kept";
  }
  // Imported into a v12 file: the rows as they read, no calls.
  {
    Writer to(into);
    Reader from(v11);
    EXPECT_EQ(copy_run(from, 1, to), 1);
  }
  {
    Reader r(into);
    EXPECT_EQ(r.schema_version(), kSchemaVersion);
    check_old_rows(r.collective_bench(1));
    EXPECT_TRUE(r.collective_bench_samples(1).empty());
  }
  // Migrated in place: the factor set from the row's figures, the new table there and empty.
  {
    Writer w(v11);
    const int64_t run = w.begin_run(bench_run());
    w.add_collective_bench_samples(run, kSamples);
  }
  Raw raw(v11);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM collective_bench_samples WHERE run_id = 1"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM collective_bench_samples WHERE run_id = 2"), 4);
  EXPECT_EQ(raw.integer("SELECT round(bus_factor * 1000) FROM collective_bench WHERE collective = 'all_reduce'"), 1500);
  EXPECT_EQ(raw.integer("SELECT p50_ns FROM collective_bench WHERE collective = 'all_reduce'"), -1);
  check_old_rows(Reader(v11).collective_bench(1));
}
