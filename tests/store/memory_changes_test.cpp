// Schema v5's memory_changes: the ledger's allocations and frees with their owners, written and
// read back per rank, what was live at a time summed by category and owner (checked against sums
// this test makes from the rows it wrote), import copying them, and a v4 file migrated to hold them.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
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

RunInfo run_info(int64_t ranks = 1) {
  RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cpu";
  info.batch_size = 4;
  info.ranks = ranks;
  info.started_at = "2026-11-25T00:00:00Z";
  return info;
}

// Two ranks' changes, as a ledger makes them: weights allocated under their layers, activations
// made and freed in forward and backward, a workspace with no owner, and a free that brings an
// owner back to zero. Times repeat across ranks (each rank's own clock) and within one (t 300).
std::vector<MemoryChangeRow> two_ranks_changes() {
  return {
      {100, "weights", "conv1", 4096, 0},       {110, "weights", "fc", 1024, 0},
      {200, "activations", "conv1", 8192, 0},   {210, "workspace", "", 512, 0},
      {300, "activations", "fc", 2048, 0},      {300, "workspace", "", -512, 0},
      {400, "activation_grads", "fc", 2048, 0}, {500, "activations", "fc", -2048, 0},
      {600, "activations", "conv1", -8192, 0},  {600, "activation_grads", "fc", -2048, 0},
      {100, "weights", "conv1", 4096, 1},       {250, "activations", "conv1", 16384, 1},
      {350, "comm", "bucket 0", 1024, 1},
  };
}

using Live = std::tuple<std::string, std::string, int64_t>;  // category, owner, bytes

// What was live at `t` on `rank`, summed here from the rows written: the answer memory_live_at
// must give, in its order (bytes descending, then category, then owner).
std::vector<Live> live_by_hand(const std::vector<MemoryChangeRow>& rows, int64_t t, int64_t rank) {
  std::map<std::pair<std::string, std::string>, int64_t> sums;
  for (const auto& r : rows) {
    if (r.rank == rank && r.t_ns <= t) sums[{r.category, r.owner}] += r.delta;
  }
  std::vector<Live> out;
  for (const auto& [key, bytes] : sums) {
    if (bytes != 0) out.emplace_back(key.first, key.second, bytes);
  }
  std::sort(out.begin(), out.end(), [](const Live& a, const Live& b) {
    if (std::get<2>(a) != std::get<2>(b)) return std::get<2>(a) > std::get<2>(b);
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  return out;
}

std::vector<Live> as_tuples(const std::vector<MemoryLiveRow>& rows) {
  std::vector<Live> out;
  for (const auto& r : rows) out.emplace_back(r.category, r.owner, r.bytes);
  return out;
}

bool same_changes(const std::vector<MemoryChangeRow>& a, const std::vector<MemoryChangeRow>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].t_ns != b[i].t_ns || a[i].category != b[i].category || a[i].owner != b[i].owner ||
        a[i].delta != b[i].delta || a[i].rank != b[i].rank)
      return false;
  }
  return true;
}

std::vector<MemoryChangeRow> of_rank(const std::vector<MemoryChangeRow>& rows, int64_t rank) {
  std::vector<MemoryChangeRow> out;
  for (const auto& r : rows) {
    if (r.rank == rank) out.push_back(r);
  }
  return out;
}

}  // namespace

TEST(StoreMemoryChanges, RoundTripPerRankInTimeOrder) {
  ts::testing::ScratchDir dir("ts_memory_changes");
  const fs::path db = dir / "runs.db";
  const auto rows = two_ranks_changes();
  int64_t run = 0, bare = 0;
  {
    Writer w(db);
    run = w.begin_run(run_info(2));
    bare = w.begin_run(run_info());
    // Written out of time order across ranks (rank 1 between rank 0's halves): read back by time.
    w.add_memory_changes(run, std::span(rows).subspan(0, 5));
    w.add_memory_changes(run, std::span(rows).subspan(10));
    w.add_memory_changes(run, std::span(rows).subspan(5, 5));
    EXPECT_THROW(w.add_memory_changes(999, rows), StoreError);
  }
  Reader r(db);
  EXPECT_TRUE(same_changes(r.memory_changes(run), of_rank(rows, 0)));
  EXPECT_TRUE(same_changes(r.memory_changes(run, 1), of_rank(rows, 1)));
  auto by_rank = of_rank(rows, 0);
  for (const auto& row : of_rank(rows, 1)) by_rank.push_back(row);
  EXPECT_TRUE(same_changes(r.memory_changes(run, kAllRanks), by_rank));
  EXPECT_TRUE(r.memory_changes(run, 2).empty());
  EXPECT_TRUE(r.memory_changes(bare, kAllRanks).empty());
  EXPECT_TRUE(r.memory_live_at(bare, 1000).empty());
  EXPECT_EQ(r.memory_changes(run).at(3).owner, "");  // the workspace has no owner
}

TEST(StoreMemoryChanges, LiveAtSumsTheChangesUpToTheTimeByCategoryAndOwner) {
  ts::testing::ScratchDir dir("ts_memory_changes");
  const fs::path db = dir / "runs.db";
  const auto rows = two_ranks_changes();
  int64_t run = 0;
  {
    Writer w(db);
    run = w.begin_run(run_info(2));
    w.add_memory_changes(run, rows);
  }
  Reader r(db);
  // Every time a change happens, one before and after each, before the first and after the last.
  for (const int64_t rank : {0, 1}) {
    std::vector<int64_t> times = {0, 99, 10'000};
    for (const auto& row : rows) times.insert(times.end(), {row.t_ns - 1, row.t_ns, row.t_ns + 1});
    for (const int64_t t : times) {
      EXPECT_EQ(as_tuples(r.memory_live_at(run, t, rank)), live_by_hand(rows, t, rank))
          << "rank " << rank << " t " << t;
    }
  }
  // Spelled out at two times: at 400 the activations of conv1 lead; the workspace allocated at
  // 210 and freed at 300 is gone (a zero sum is left out), and so is everything before 100.
  EXPECT_EQ(as_tuples(r.memory_live_at(run, 400)), (std::vector<Live>{{"activations", "conv1", 8192},
                                                                      {"weights", "conv1", 4096},
                                                                      {"activation_grads", "fc", 2048},
                                                                      {"activations", "fc", 2048},
                                                                      {"weights", "fc", 1024}}));
  EXPECT_EQ(as_tuples(r.memory_live_at(run, 250)), (std::vector<Live>{{"activations", "conv1", 8192},
                                                                      {"weights", "conv1", 4096},
                                                                      {"weights", "fc", 1024},
                                                                      {"workspace", "", 512}}));
  EXPECT_TRUE(r.memory_live_at(run, 99).empty());
  // After the last change only the weights are live: the total is what was never freed.
  int64_t total = 0;
  for (const auto& l : r.memory_live_at(run, 10'000)) total += l.bytes;
  EXPECT_EQ(total, 4096 + 1024);
  EXPECT_TRUE(r.memory_live_at(run, 10'000, 7).empty());  // a rank with no changes
}

TEST(StoreMemoryChanges, GoWithTheirRunAndAreCopiedByImport) {
  ts::testing::ScratchDir dir("ts_memory_changes");
  const fs::path from_db = dir / "from.db", to_db = dir / "to.db";
  const auto rows = two_ranks_changes();
  int64_t run = 0;
  {
    Writer w(from_db);
    run = w.begin_run(run_info(2));
    w.add_memory_changes(run, rows);
    w.finish_run(run, RunStatus::completed, "2026-11-25T00:01:00Z", "");
  }
  int64_t copy = 0;
  {
    Writer to(to_db);
    to.begin_run(run_info());  // something there already: the copy gets a new id
    Reader from(from_db);
    copy = copy_run(from, run, to);
  }
  Reader a(from_db), b(to_db);
  EXPECT_NE(copy, run);
  EXPECT_TRUE(same_changes(b.memory_changes(copy, kAllRanks), a.memory_changes(run, kAllRanks)));
  EXPECT_EQ(as_tuples(b.memory_live_at(copy, 400, 1)), live_by_hand(rows, 400, 1));
  {
    Writer w(from_db);
    w.delete_run(run);
  }
  Raw raw(from_db);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM memory_changes"), 0);
}

// A v4 file (made with the v4 DDL): read as having no changes, then migrated to v5 by a writer,
// after which its old run still has none and a new run's changes are summed as any.
TEST(StoreMemoryChanges, AVersionFourFileHasNoneAndIsMigrated) {
  ts::testing::ScratchDir dir("ts_memory_changes");
  const fs::path db = dir / "v4.db";
  {
    Raw raw(db);
    std::string ddl;
    for (int v = 0; v < 4; ++v) ddl += std::string(detail::migration_sql(v));
    raw.exec(ddl);
    raw.exec("PRAGMA user_version = 4; PRAGMA application_id = " + std::to_string(kApplicationId));
    raw.exec("INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
             "parameter_count, started_at, command_line, config_json, status) VALUES ('resnet50', 'tiny', 'cpu', "
             "4, 2, 1, 1, 1, 1, 100, '2026-11-22T00:00:00Z', 'trainscope run', '{}', 'completed');"
             "INSERT INTO strings (id, value) VALUES (1, 'weights');"
             "INSERT INTO memory_timeline (run_id, t_ns, category_id, live_bytes) VALUES (1, 10, 1, 64);"
             "INSERT INTO memory_peak (run_id, category, bytes, t_ns) VALUES (1, 'weights', 64, 10);");
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name = 'memory_changes'"), 0);
  }
  {
    Reader r(db);
    EXPECT_EQ(r.schema_version(), 4);
    EXPECT_EQ(r.memory_peak(1).at(0).bytes, 64);
    EXPECT_TRUE(r.memory_changes(1, kAllRanks).empty());
    EXPECT_TRUE(r.memory_live_at(1, 10).empty());
  }
  const auto rows = two_ranks_changes();
  int64_t run = 0;
  {
    Writer w(db);  // migrates
    run = w.begin_run(run_info(2));
    w.add_memory_changes(run, rows);
  }
  {
    Raw raw(db);
    EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name = 'memory_changes_run_rank_t'"), 1);
  }
  Reader r(db);
  EXPECT_TRUE(r.memory_changes(1, kAllRanks).empty());
  EXPECT_TRUE(r.memory_live_at(1, 10).empty());
  EXPECT_EQ(r.memory_timeline(1).at(0).live_bytes, 64);
  EXPECT_TRUE(same_changes(r.memory_changes(run, kAllRanks), [&] {
    auto all = of_rank(rows, 0);
    for (const auto& row : of_rank(rows, 1)) all.push_back(row);
    return all;
  }()));
  EXPECT_EQ(as_tuples(r.memory_live_at(run, 400)), live_by_hand(rows, 400, 0));
}
