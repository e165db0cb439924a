// Schema v6 (parameter servers): a worker's pull and push waits in rank_breakdown, the staleness
// histograms (ps_staleness) and the server shards' totals (ps_servers): written and read back in
// their order, gone with their run, copied by import, and a v5 file migrated to hold them.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "store/import.h"
#include "store/open.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/writer.h"
#include "tests/store/error_kind.h"
#include "tests/store/raw_sqlite.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::store;
using ts::store::test_support::Raw;

namespace {

RunInfo ps_run(int64_t ranks = 4) {
  RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cpu";
  info.batch_size = 8;
  info.ranks = ranks;
  info.started_at = "2026-11-25T00:00:00Z";
  info.config_json = R"({"strategy":"ps"})";
  return info;
}

// Two workers (ranks 2 and 3) and what two servers counted of them, written out of the order
// they read back in: kind, then rank, iteration, staleness.
const std::vector<PsStalenessRow> kStaleness = {
    {3, 1, "updates", 0, 7},   {2, 1, "updates", 2, 1},    {2, 1, "updates", 0, 5}, {2, 0, "updates", 0, 9},
    {2, 1, "clock_gap", 1, 3}, {3, -1, "clock_gap", 0, 4}, {2, 1, "updates", 1, 2}, {3, 1, "updates", 3, 1},
};
// What they read back as (the order of the rows above after sorting).
const std::vector<PsStalenessRow> kStalenessSorted = {
    {2, 1, "clock_gap", 1, 3}, {3, -1, "clock_gap", 0, 4}, {2, 0, "updates", 0, 9}, {2, 1, "updates", 0, 5},
    {2, 1, "updates", 1, 2},   {2, 1, "updates", 2, 1},    {3, 1, "updates", 0, 7}, {3, 1, "updates", 3, 1},
};

PsServerRow server(int64_t id, int64_t rank, int64_t scale) {
  PsServerRow s;
  s.server = id;
  s.rank = rank;
  s.keys = 10 * scale;
  s.bytes_held = 4096 * scale;
  s.bytes_in = 100'000 * scale;
  s.bytes_out = 200'000 * scale;
  s.pushes = 40 * scale;
  s.pulls = 41 * scale;
  s.updates = 39 * scale;
  s.busy_ns = 5'000'000 * scale;
  s.queue_max = 3 * scale;
  s.queue_mean = 0.75 * static_cast<double>(scale);
  return s;
}
// Server 1 written before server 0: read back by server.
const std::vector<PsServerRow> kServers = {server(1, 1, 2), server(0, 0, 1)};

// Workers' iterations with their waits (and the v4 parts beside them).
const std::vector<RankBreakdownRow> kBreakdown = {
    {3, 1, 1100, 1200, 60, 30, 0, 30, 10, 0, 25, 5},
    {2, 1, 100, 200, 70, 25, 0, 25, 5, 0, 18, 7},
    {2, 0, 0, 100, 65, 30, 0, 30, 5, 0, 22, 8},
};

bool same(const PsStalenessRow& a, const PsStalenessRow& b) {
  return a.rank == b.rank && a.iteration == b.iteration && a.kind == b.kind && a.staleness == b.staleness &&
         a.count == b.count;
}
bool same(const PsServerRow& a, const PsServerRow& b) {
  return a.server == b.server && a.rank == b.rank && a.keys == b.keys && a.bytes_held == b.bytes_held &&
         a.bytes_in == b.bytes_in && a.bytes_out == b.bytes_out && a.pushes == b.pushes && a.pulls == b.pulls &&
         a.updates == b.updates && a.busy_ns == b.busy_ns && a.queue_max == b.queue_max && a.queue_mean == b.queue_mean;
}
bool same(const RankBreakdownRow& a, const RankBreakdownRow& b) {
  return a.rank == b.rank && a.iteration == b.iteration && a.start_ns == b.start_ns && a.end_ns == b.end_ns &&
         a.compute_ns == b.compute_ns && a.comm_ns == b.comm_ns && a.overlap_ns == b.overlap_ns &&
         a.exposed_comm_ns == b.exposed_comm_ns && a.idle_ns == b.idle_ns && a.backward_wait_ns == b.backward_wait_ns &&
         a.pull_wait_ns == b.pull_wait_ns && a.push_wait_ns == b.push_wait_ns;
}
template <class Row>
bool same_rows(const std::vector<Row>& a, const std::vector<Row>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same(a[i], b[i])) return false;
  }
  return true;
}

// kBreakdown as rank_breakdown reads it back: by rank, iteration.
std::vector<RankBreakdownRow> breakdown_sorted() { return {kBreakdown[2], kBreakdown[1], kBreakdown[0]}; }

int64_t write_ps_run(Writer& w) {
  const int64_t run = w.begin_run(ps_run());
  // In two calls, to show the order is the reader's, not the writes'.
  w.add_ps_staleness(run, std::span(kStaleness).subspan(4));
  w.add_ps_staleness(run, std::span(kStaleness).subspan(0, 4));
  w.add_ps_servers(run, kServers);
  w.add_rank_breakdown(run, kBreakdown);
  return run;
}

}  // namespace

TEST(StorePs, NewFileHasTheV6TablesAndColumns) {
  ts::testing::ScratchDir dir("ts_ps_store");
  const fs::path db = dir / "runs.db";
  { Writer w(db); }
  Raw raw(db);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_GE(kSchemaVersion, 6);
  for (const char* name : {"ps_staleness", "ps_servers", "ps_staleness_run_kind", "ps_servers_run"})
    EXPECT_EQ(raw.integer(std::string("SELECT count(*) FROM sqlite_master WHERE name = '") + name + "'"), 1) << name;
  for (const char* column : {"pull_wait_ns", "push_wait_ns"})
    EXPECT_EQ(raw.integer(std::string("SELECT count(*) FROM pragma_table_info('rank_breakdown') WHERE name = '") +
                          column + "'"),
              1)
        << column;
  // Their rows go with their run, as every per-run table's do.
  for (const char* table : {"ps_staleness", "ps_servers"})
    EXPECT_EQ(raw.integer(std::string("SELECT count(*) FROM pragma_foreign_key_list('") + table +
                          "') WHERE \"table\" = 'runs' AND \"from\" = 'run_id' AND on_delete = 'CASCADE'"),
              1)
        << table;
}

TEST(StorePs, TablesAndBreakdownWaitsRoundTripInOrder) {
  ts::testing::ScratchDir dir("ts_ps_store");
  const fs::path db = dir / "runs.db";
  int64_t run = 0, other = 0;
  {
    Writer w(db);
    run = write_ps_run(w);
    other = w.begin_run(ps_run(1));
    EXPECT_EQ(ts::testing::error_kind([&] { w.add_ps_staleness(run + 10, kStaleness); }), StoreError::Kind::not_found);
    EXPECT_EQ(ts::testing::error_kind([&] { w.add_ps_servers(run + 10, kServers); }), StoreError::Kind::not_found);
  }
  Reader r(db);
  EXPECT_TRUE(same_rows(r.ps_staleness(run), kStalenessSorted));
  const auto servers = r.ps_servers(run);
  ASSERT_EQ(servers.size(), 2u);
  EXPECT_TRUE(same(servers[0], kServers[1]));
  EXPECT_TRUE(same(servers[1], kServers[0]));
  EXPECT_DOUBLE_EQ(servers[1].queue_mean, 1.5);
  EXPECT_EQ(servers[1].rank, 1);
  const auto bd = r.rank_breakdown(run);
  EXPECT_TRUE(same_rows(bd, breakdown_sorted()));
  EXPECT_EQ(bd.at(0).pull_wait_ns, 22);
  EXPECT_EQ(bd.at(0).push_wait_ns, 8);
  // A run without them has none.
  EXPECT_TRUE(r.ps_staleness(other).empty());
  EXPECT_TRUE(r.ps_servers(other).empty());
  EXPECT_TRUE(r.rank_breakdown(other).empty());
}

TEST(StorePs, OneRunsHistogramIsReadThroughItsIndex) {
  ts::testing::ScratchDir dir("ts_ps_store");
  const fs::path db = dir / "runs.db";
  {
    Writer w(db);
    write_ps_run(w);
  }
  Raw raw(db);
  const std::string plan = raw.plan("SELECT rank, iteration, kind, staleness, count FROM ps_staleness WHERE run_id = 1 "
                                    "ORDER BY kind, rank, iteration, staleness, id");
  EXPECT_NE(plan.find("ps_staleness_run_kind"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << plan;  // no sort: the index's order
  const std::string one_kind = raw.plan(
      "SELECT staleness, count FROM ps_staleness WHERE run_id = 1 AND kind = 'updates' AND rank = 2 AND iteration = 1");
  EXPECT_NE(one_kind.find("ps_staleness_run_kind (run_id=? AND kind=? AND rank=? AND iteration=?)"), std::string::npos)
      << one_kind;
}

TEST(StorePs, DeletingARunDeletesItsPsRowsOnly) {
  ts::testing::ScratchDir dir("ts_ps_store");
  const fs::path db = dir / "runs.db";
  int64_t gone = 0, kept = 0;
  {
    Writer w(db);
    gone = write_ps_run(w);
    kept = write_ps_run(w);
    w.delete_run(gone);
  }
  Reader r(db);
  EXPECT_TRUE(r.ps_staleness(gone).empty());
  EXPECT_TRUE(r.ps_servers(gone).empty());
  EXPECT_TRUE(same_rows(r.ps_staleness(kept), kStalenessSorted));
  Raw raw(db);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM ps_staleness"), static_cast<int64_t>(kStaleness.size()));
  EXPECT_EQ(raw.integer("SELECT count(*) FROM ps_servers"), static_cast<int64_t>(kServers.size()));
  EXPECT_EQ(raw.integer("SELECT count(*) FROM rank_breakdown"), static_cast<int64_t>(kBreakdown.size()));
  EXPECT_EQ(raw.integer("SELECT count(*) FROM ps_staleness WHERE run_id = " + std::to_string(gone)), 0);
}

TEST(StoreImport, CopiesThePsTablesAndTheBreakdownWaits) {
  ts::testing::ScratchDir dir("ts_ps_store");
  const fs::path from_db = dir / "from.db", to_db = dir / "to.db";
  int64_t run = 0;
  {
    Writer w(from_db);
    run = write_ps_run(w);
    w.finish_run(run, RunStatus::completed, "2026-11-25T00:05:00Z", "");
  }
  int64_t copy = 0;
  {
    Writer to(to_db);
    to.begin_run(ps_run(1));  // something there already: the copy gets a new id
    Reader from(from_db);
    copy = copy_run(from, run, to);
  }
  EXPECT_NE(copy, run);
  Reader b(to_db);
  EXPECT_TRUE(same_rows(b.ps_staleness(copy), kStalenessSorted));
  EXPECT_TRUE(same_rows(b.ps_servers(copy), std::vector<PsServerRow>{kServers[1], kServers[0]}));
  EXPECT_TRUE(same_rows(b.rank_breakdown(copy), breakdown_sorted()));
  // Merged over itself (a spill replacing its streamed part): nothing is doubled.
  {
    Writer to(to_db);
    Reader from(from_db);
    EXPECT_EQ(copy_run(from, run, to, copy), copy);
  }
  Reader c(to_db);
  EXPECT_TRUE(same_rows(c.ps_staleness(copy), kStalenessSorted));
  EXPECT_EQ(c.ps_servers(copy).size(), kServers.size());
}

// A v5 file (made with the v5 DDL) with a data-parallel run's breakdown: read as it is (waits 0,
// no ps rows), then migrated to v6 by a writer, after which the old rows read with waits 0, the
// new tables are empty, and a new run's ps rows are stored as any.
TEST(StorePs, AVersionFiveFileMigratesWithZeroWaitsAndNoPsRows) {
  ts::testing::ScratchDir dir("ts_ps_store");
  const fs::path db = dir / "v5.db";
  {
    Raw raw(db);
    std::string ddl;
    for (int v = 0; v < 5; ++v) ddl += std::string(detail::migration_sql(v));
    raw.exec(ddl);
    raw.exec("PRAGMA user_version = 5; PRAGMA application_id = " + std::to_string(kApplicationId));
    raw.exec(
        "INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
        "parameter_count, started_at, command_line, config_json, status, ranks) VALUES ('resnet50', 'tiny', 'cpu', "
        "4, 2, 1, 1, 1, 1, 100, '2026-11-22T00:00:00Z', 'trainscope run', '{}', 'completed', 2);"
        "INSERT INTO rank_breakdown (run_id, rank, iteration, start_ns, end_ns, compute_ns, comm_ns, overlap_ns, "
        "exposed_comm_ns, idle_ns, backward_wait_ns) VALUES (1, 1, 3, 10, 90, 50, 30, 20, 10, 20, 4);");
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name = 'ps_staleness'"), 0);
  }
  {
    Reader r(db);  // never migrates
    EXPECT_EQ(r.schema_version(), 5);
    const auto bd = r.rank_breakdown(1);
    ASSERT_EQ(bd.size(), 1u);
    EXPECT_EQ(bd[0].backward_wait_ns, 4);
    EXPECT_EQ(bd[0].pull_wait_ns, 0);
    EXPECT_EQ(bd[0].push_wait_ns, 0);
    EXPECT_TRUE(r.ps_staleness(1).empty());
    EXPECT_TRUE(r.ps_servers(1).empty());
  }
  int64_t run = 0;
  {
    Writer w(db);  // migrates
    run = write_ps_run(w);
  }
  {
    Raw raw(db);
    EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(raw.integer("SELECT pull_wait_ns + push_wait_ns FROM rank_breakdown WHERE run_id = 1"), 0);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM ps_staleness WHERE run_id = 1"), 0);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM ps_servers WHERE run_id = 1"), 0);
  }
  Reader r(db);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  const auto old = r.rank_breakdown(1);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_TRUE(same(old[0], RankBreakdownRow{1, 3, 10, 90, 50, 30, 20, 10, 20, 4, 0, 0}));
  EXPECT_TRUE(r.ps_staleness(1).empty());
  EXPECT_TRUE(r.ps_servers(1).empty());
  EXPECT_TRUE(same_rows(r.ps_staleness(run), kStalenessSorted));
  EXPECT_TRUE(same_rows(r.rank_breakdown(run), breakdown_sorted()));
  EXPECT_EQ(r.ps_servers(run).size(), kServers.size());
  // Deleting the migrated file's old run works through the new tables' foreign keys too.
  {
    Writer w(db);
    w.delete_run(1);
  }
  EXPECT_FALSE(Reader(db).run(1).has_value());
}
