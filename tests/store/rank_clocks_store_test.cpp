// Schema v11: each rank's clock against rank 0's. rank_clocks rows read back by rank and phase;
// import copies them; a v10 file has none and migrates to v11 with an empty table.
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

RunInfo three_rank_run() {
  RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cpu";
  info.batch_size = 8;
  info.ranks = 3;
  info.started_at = "2026-12-01T00:00:00Z";
  return info;
}

// Written out of the order they read back in.
const std::vector<RankClockRow> kRows = {{2, "start", -7'000'000'000, 900, 1'000, 2'000, 32},
                                         {1, "start", 2'500'000'123, 450, 1'100, 1'500, 32},
                                         {1, "end", 2'500'001'000, 600, 9'001'100, 1'700, 31}};

void expect_rows(const std::vector<RankClockRow>& got, const std::vector<RankClockRow>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].rank, want[i].rank);
    EXPECT_EQ(got[i].phase, want[i].phase);
    EXPECT_EQ(got[i].offset_ns, want[i].offset_ns);
    EXPECT_EQ(got[i].uncertainty_ns, want[i].uncertainty_ns);
    EXPECT_EQ(got[i].at_ns, want[i].at_ns);
    EXPECT_EQ(got[i].min_round_trip_ns, want[i].min_round_trip_ns);
    EXPECT_EQ(got[i].pings, want[i].pings);
  }
}

}  // namespace

TEST(StoreRankClocks, RowsReadBackByRankAndPhaseAndImportCarriesThem) {
  ts::testing::ScratchDir dir("ts_rank_clocks");
  const fs::path db = dir / "c.db", other = dir / "other.db";
  int64_t run = 0;
  {
    Writer w(db);
    run = w.begin_run(three_rank_run());
    w.add_rank_clocks(run, kRows);
    w.finish_run(run, RunStatus::completed, "2026-12-01T00:05:00Z", "");
  }
  const std::vector<RankClockRow> ordered = {kRows[2], kRows[1], kRows[0]};  // rank, then "end" < "start"
  expect_rows(Reader(db).rank_clocks(run), ordered);
  int64_t copy = 0;
  {
    Writer to(other);
    to.begin_run(three_rank_run());  // something there already: the copy gets a new id
    Reader from(db);
    copy = copy_run(from, run, to);
  }
  expect_rows(Reader(other).rank_clocks(copy), ordered);
  EXPECT_TRUE(Reader(other).rank_clocks(copy + 1).empty());
}

TEST(StoreRankClocks, AVersionTenFileHasNoneAndMigrates) {
  ts::testing::ScratchDir dir("ts_rank_clocks");
  const fs::path db = dir / "v10.db";
  ts::store::test_support::write_old_file(db, 10, 2);
  {
    Reader r(db);  // never migrates
    EXPECT_EQ(r.schema_version(), 10);
    EXPECT_TRUE(r.rank_clocks(1).empty()) << "before v11 nothing says how the ranks' clocks relate";
  }
  {
    Writer w(db);  // migrates
    const int64_t run = w.begin_run(three_rank_run());
    w.add_rank_clocks(run, kRows);
  }
  Raw raw(db);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM rank_clocks WHERE run_id = 1"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM rank_clocks WHERE run_id = 2"), 3);
  const std::string plan = raw.plan("SELECT * FROM rank_clocks WHERE run_id = 2 ORDER BY rank, phase");
  EXPECT_NE(plan.find("rank_clocks_run"), std::string::npos) << plan;
}
