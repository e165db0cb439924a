// Schema v13: every collective call split per rank into waiting and moving. collective_waits rows
// read back by iteration, collective, label, call, rank; import copies them; a v12 file has none
// and migrates to v13 with an empty table.
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

RunInfo two_rank_run() {
  RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cpu";
  info.batch_size = 8;
  info.ranks = 2;
  info.started_at = "2026-12-01T00:00:00Z";
  return info;
}

// Written out of the order they read back in: iteration 4 before 3, rank 1 before rank 0.
const std::vector<CollectiveWaitRow> kRows = {
    {1, 4, "all_reduce", "bucket 0.0", 0, 4096, 9'000, 9'000, 1, 0, 700, 240},
    {0, 4, "all_reduce", "bucket 0.0", 0, 4096, 8'500, 9'000, 1, 500, 700, 240},
    {1, 3, "all_reduce", "bucket 0.0", 0, 4096, 1'000, 3'000, 0, 2'000, 2'000, 240},
    {0, 3, "all_reduce", "bucket 0.0", 0, 4096, 3'000, 3'000, 0, 0, 2'000, 240}};

void expect_rows(const std::vector<CollectiveWaitRow>& got, const std::vector<CollectiveWaitRow>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    const auto &g = got[i], &w = want[i];
    EXPECT_EQ(g.rank, w.rank);
    EXPECT_EQ(g.iteration, w.iteration);
    EXPECT_EQ(g.collective, w.collective);
    EXPECT_EQ(g.label, w.label);
    EXPECT_EQ(g.call, w.call);
    EXPECT_EQ(g.bytes, w.bytes);
    EXPECT_EQ(g.arrival_ns, w.arrival_ns);
    EXPECT_EQ(g.last_arrival_ns, w.last_arrival_ns);
    EXPECT_EQ(g.last_rank, w.last_rank);
    EXPECT_EQ(g.waiting_ns, w.waiting_ns);
    EXPECT_EQ(g.moving_ns, w.moving_ns);
    EXPECT_EQ(g.uncertainty_ns, w.uncertainty_ns);
  }
}

}  // namespace

TEST(StoreCollectiveWaits, RowsReadBackByCallAndRankAndImportCarriesThem) {
  ts::testing::ScratchDir dir("ts_collective_waits");
  const fs::path db = dir / "w.db", other = dir / "other.db";
  int64_t run = 0;
  {
    Writer w(db);
    run = w.begin_run(two_rank_run());
    w.add_collective_waits(run, kRows);
    w.finish_run(run, RunStatus::completed, "2026-12-01T00:05:00Z", "");
  }
  const std::vector<CollectiveWaitRow> ordered = {kRows[3], kRows[2], kRows[1], kRows[0]};
  expect_rows(Reader(db).collective_waits(run), ordered);
  int64_t copy = 0;
  {
    Writer to(other);
    to.begin_run(two_rank_run());  // something there already: the copy gets a new id
    Reader from(db);
    copy = copy_run(from, run, to);
  }
  expect_rows(Reader(other).collective_waits(copy), ordered);
  EXPECT_TRUE(Reader(other).collective_waits(copy - 1).empty());
}

TEST(StoreCollectiveWaits, AVersionTwelveFileHasNoneAndMigrates) {
  ts::testing::ScratchDir dir("ts_collective_waits");
  const fs::path db = dir / "v12.db";
  ts::store::test_support::write_old_file(db, 12, 2);
  {
    Reader r(db);  // never migrates
    EXPECT_EQ(r.schema_version(), 12);
    EXPECT_TRUE(r.collective_waits(1).empty()) << "before v13 the split was not stored";
  }
  {
    Writer w(db);  // migrates
    const int64_t run = w.begin_run(two_rank_run());
    w.add_collective_waits(run, kRows);
  }
  Raw raw(db);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM collective_waits WHERE run_id = 1"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM collective_waits WHERE run_id = 2"), 4);
  const std::string plan = raw.plan("SELECT * FROM collective_waits WHERE run_id = 2 ORDER BY iteration, rank");
  EXPECT_NE(plan.find("collective_waits_run"), std::string::npos) << plan;
}
