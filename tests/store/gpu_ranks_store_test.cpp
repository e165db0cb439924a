// Schema v10: every rank's GPU breakdown. gpu_breakdown rows carry their rank; the reader gives
// rank 0's by default (what a single-rank view reads), one rank's or every rank's (by rank, device,
// iteration); import copies every rank's; a v9 file reads as rank 0's and migrates to v10 with its
// rows rank 0's and the index leading with (run_id, rank).
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
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

RunInfo two_rank_run() {
  RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cuda";
  info.batch_size = 8;
  info.ranks = 2;
  info.started_at = "2026-12-01T00:00:00Z";
  return info;
}

GpuBreakdownRow row(int64_t rank, int64_t device, int64_t iteration) {
  GpuBreakdownRow r;
  r.rank = rank;
  r.device = device;
  r.iteration = iteration;
  // Distinct figures per row, so a row read back in the wrong place shows.
  const int64_t base = 1000 * rank + 100 * device + iteration;
  r.start_ns = base;
  r.end_ns = base + 50;
  r.compute_ns = 30 + rank;
  r.comm_ns = 12 + rank;
  r.memcpy_ns = 3;
  r.memset_ns = 1;
  r.overlap_ns = 5;
  r.exposed_comm_ns = 7 + rank;
  r.busy_ns = 40;
  r.idle_ns = 10;
  return r;
}

// Written out of the order they read back in: rank 1 before rank 0, device 1 before device 0.
const std::vector<GpuBreakdownRow> kRows = {row(1, 1, 3), row(1, 0, 4), row(1, 0, 3), row(0, 0, 4), row(0, 0, 3)};

bool same(const GpuBreakdownRow& a, const GpuBreakdownRow& b) {
  return a.rank == b.rank && a.device == b.device && a.iteration == b.iteration && a.start_ns == b.start_ns &&
         a.end_ns == b.end_ns && a.compute_ns == b.compute_ns && a.comm_ns == b.comm_ns && a.memcpy_ns == b.memcpy_ns &&
         a.memset_ns == b.memset_ns && a.overlap_ns == b.overlap_ns && a.exposed_comm_ns == b.exposed_comm_ns &&
         a.busy_ns == b.busy_ns && a.idle_ns == b.idle_ns;
}

void expect_rows(const std::vector<GpuBreakdownRow>& got, const std::vector<GpuBreakdownRow>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(same(got[i], want[i])) << i << ": rank " << got[i].rank << " device " << got[i].device << " iteration "
                                       << got[i].iteration;
  }
}

int64_t write_two_ranks(Writer& w) {
  const int64_t run = w.begin_run(two_rank_run());
  w.add_gpu_breakdown(run, kRows);
  return run;
}

}  // namespace

TEST(StoreGpuRanks, EachRanksRowsAreReadBackByRankDeviceIteration) {
  ts::testing::ScratchDir dir("ts_gpu_ranks");
  const fs::path db = dir / "r.db";
  int64_t run = 0;
  {
    Writer w(db);
    run = write_two_ranks(w);
  }
  Reader r(db);
  expect_rows(r.gpu_breakdown(run), {row(0, 0, 3), row(0, 0, 4)});  // rank 0's by default
  expect_rows(r.gpu_breakdown(run, 1), {row(1, 0, 3), row(1, 0, 4), row(1, 1, 3)});
  expect_rows(r.gpu_breakdown(run, std::nullopt),
              {row(0, 0, 3), row(0, 0, 4), row(1, 0, 3), row(1, 0, 4), row(1, 1, 3)});
  EXPECT_TRUE(r.gpu_breakdown(run, 2).empty());
}

TEST(StoreGpuRanks, ImportCopiesEveryRanksRows) {
  ts::testing::ScratchDir dir("ts_gpu_ranks");
  const fs::path from_db = dir / "from.db", to_db = dir / "to.db";
  int64_t run = 0;
  {
    Writer w(from_db);
    run = write_two_ranks(w);
    w.finish_run(run, RunStatus::completed, "2026-12-01T00:05:00Z", "");
  }
  int64_t copy = 0;
  {
    Writer to(to_db);
    to.begin_run(two_rank_run());  // something there already: the copy gets a new id
    Reader from(from_db);
    copy = copy_run(from, run, to);
  }
  EXPECT_NE(copy, run);
  Reader b(to_db);
  expect_rows(b.gpu_breakdown(copy, std::nullopt), Reader(from_db).gpu_breakdown(run, std::nullopt));
  EXPECT_EQ(b.gpu_breakdown(copy, 1).size(), 3u);
  // Merged over itself (a spill replacing its streamed part): nothing is doubled, no rank lost.
  {
    Writer to(to_db);
    Reader from(from_db);
    EXPECT_EQ(copy_run(from, run, to, copy), copy);
  }
  expect_rows(Reader(to_db).gpu_breakdown(copy, std::nullopt),
              {row(0, 0, 3), row(0, 0, 4), row(1, 0, 3), row(1, 0, 4), row(1, 1, 3)});
}

// A v9 file (made with the v9 DDL) holding rank 0's breakdown, as every run before v10 did: read
// as it is (rank 0's rows, no other rank), then migrated to v10 by a writer, after which the old
// rows are rank 0's, the index leads with (run_id, rank) and a new run's ranks are stored apart.
TEST(StoreGpuRanks, AVersionNineFileReadsAsRankZeroAndMigrates) {
  ts::testing::ScratchDir dir("ts_gpu_ranks");
  const fs::path db = dir / "v9.db";
  {
    Raw raw(db);
    std::string ddl;
    for (int v = 0; v < 9; ++v) ddl += std::string(detail::migration_sql(v));
    raw.exec(ddl);
    raw.exec("PRAGMA user_version = 9; PRAGMA application_id = " + std::to_string(kApplicationId));
    raw.exec(
        "INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
        "parameter_count, started_at, command_line, config_json, status) VALUES ('resnet50', 'tiny', 'cuda:0', "
        "4, 2, 1, 1, 1, 1, 100, '2026-11-22T00:00:00Z', 'trainscope run', '{}', 'completed');"
        "INSERT INTO gpu_breakdown (run_id, device, iteration, start_ns, end_ns, compute_ns, comm_ns, memcpy_ns, "
        "memset_ns, overlap_ns, exposed_comm_ns, busy_ns, idle_ns) VALUES (1, 0, 3, 100, 400, 220, 150, 20, 0, 70, "
        "80, 320, 80);");
    EXPECT_EQ(raw.integer("SELECT count(*) FROM pragma_table_info('gpu_breakdown') WHERE name = 'rank'"), 0);
  }
  const GpuBreakdownRow old{0, 3, 100, 400, 220, 150, 20, 0, 70, 80, 320, 80, 0};
  {
    Reader r(db);  // never migrates
    EXPECT_EQ(r.schema_version(), 9);
    expect_rows(r.gpu_breakdown(1), {old});
    expect_rows(r.gpu_breakdown(1, std::nullopt), {old});
    EXPECT_TRUE(r.gpu_breakdown(1, 1).empty());
  }
  int64_t run = 0;
  {
    Writer w(db);  // migrates
    run = write_two_ranks(w);
  }
  {
    Raw raw(db);
    EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(raw.integer("SELECT rank FROM gpu_breakdown WHERE run_id = 1"), 0);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name = 'gpu_breakdown_run'"), 0);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name = 'gpu_breakdown_run_rank'"), 1);
    const std::string plan =
        raw.plan("SELECT * FROM gpu_breakdown WHERE run_id = 2 AND rank = 1 ORDER BY device, iteration");
    EXPECT_NE(plan.find("gpu_breakdown_run_rank"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << plan;  // the index gives the order
  }
  Reader r(db);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  expect_rows(r.gpu_breakdown(1, std::nullopt), {old});
  expect_rows(r.gpu_breakdown(run, 1), {row(1, 0, 3), row(1, 0, 4), row(1, 1, 3)});
}
