// Schema v15 (issue 44): the parameters whose gradients a run's backward produces (gradients) and
// projected distributed iterations with their error ledger (projections): written and read back
// in their order, refused for a missing run, gone with their own run but not with their inputs,
// copied by import, and a v14 file migrated to hold them.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
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

RunInfo run_of(const std::string& workload, int64_t ranks = 1, const std::string& framework = "trainscope") {
  RunInfo info;
  info.workload = workload;
  info.preset = "tiny";
  info.device = "cpu";
  info.batch_size = 8;
  info.ranks = ranks;
  info.started_at = "2026-12-10T00:00:00Z";
  info.framework = framework;
  return info;
}

// wgan's two gradient groups on two ranks, written out of the order they read back in: rank,
// then group, then slot.
const std::vector<GradientRow> kGradients = {
    {1, 0, "critic.0.weight", 8192, 0},  {0, 1, "generator.0.bias", 512, 0}, {0, 0, "generator.0.weight", 65536, 0},
    {1, 1, "critic.0.bias", 256, 1},     {1, 0, "critic.0.weight", 8192, 1}, {0, 0, "generator.0.weight", 65536, 1},
    {1, 2, "critic.fc.weight", 4096, 0}, {1, 1, "critic.0.bias", 256, 0},
};
// Rank 0's, as read back.
const std::vector<GradientRow> kRank0 = {kGradients[2], kGradients[1], kGradients[0], kGradients[7], kGradients[6]};
// Rank 1's, as read back.
const std::vector<GradientRow> kRank1 = {kGradients[5], kGradients[4], kGradients[3]};

bool same(const GradientRow& a, const GradientRow& b) {
  return a.group == b.group && a.slot == b.slot && a.name == b.name && a.bytes == b.bytes && a.rank == b.rank;
}
// Every field but the id, which the store assigns.
bool same(const ProjectionRow& a, const ProjectionRow& b) {
  return a.run_id == b.run_id && a.source_run_id == b.source_run_id && a.sweep_run_id == b.sweep_run_id &&
         a.measured_run_id == b.measured_run_id && a.strategy == b.strategy && a.ranks == b.ranks && a.link == b.link &&
         a.latency_ns == b.latency_ns && a.bandwidth_gbps == b.bandwidth_gbps && a.knobs_json == b.knobs_json &&
         a.model_json == b.model_json && a.projected_ns == b.projected_ns && a.measured_ns == b.measured_ns &&
         a.error == b.error && a.created_at == b.created_at;
}
template <class Row>
bool same_rows(const std::vector<Row>& a, const std::vector<Row>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same(a[i], b[i])) return false;
  }
  return true;
}

// A projection of `source` onto 4 ranks, checked against `measured` (0: not measured).
ProjectionRow projection(int64_t run, int64_t source, int64_t sweep, int64_t measured) {
  ProjectionRow p;
  p.run_id = run;
  p.source_run_id = source;
  p.sweep_run_id = sweep;
  p.measured_run_id = measured;
  p.strategy = measured != 0 ? "allreduce" : "ps";
  p.ranks = 4;
  p.link = sweep != 0 ? "fitted to run " + std::to_string(sweep) : "nominal 10 GbE";
  p.latency_ns = 12'500.25;
  p.bandwidth_gbps = 1.1875;
  p.knobs_json = R"({"bucket_bytes":26214400,"overlap":true})";
  p.model_json = R"({"link":{"alpha_ns":12500.25,"beta_gbps":1.1875},"compute":"as measured"})";
  p.projected_ns = 41'000'000.5;
  if (measured != 0) {
    p.measured_ns = 40'000'000.0;
    p.error = p.projected_ns / p.measured_ns - 1;
  }
  p.created_at = "2026-12-10T01:02:03Z";
  return p;
}

// The runs a projection links: a one-rank source with its gradients, a collectives sweep, a
// measured four-rank run, and the projection's own run.
struct Runs {
  int64_t source = 0, sweep = 0, measured = 0, projected = 0;
};
Runs write_runs(Writer& w) {
  Runs r;
  r.source = w.begin_run(run_of("wgan"));
  // In two calls, to show the order is the reader's, not the writes'.
  w.add_gradients(r.source, std::span(kGradients).subspan(4));
  w.add_gradients(r.source, std::span(kGradients).subspan(0, 4));
  r.sweep = w.begin_run(run_of("collectives", 4));
  r.measured = w.begin_run(run_of("wgan", 4));
  r.projected = w.begin_run(run_of("wgan", 4, "projection"));
  return r;
}

}  // namespace

TEST(StoreProjection, NewFileHasTheV15TablesAndIndexes) {
  ts::testing::ScratchDir dir("ts_projection_store");
  const fs::path db = dir / "runs.db";
  { Writer w(db); }
  Raw raw(db);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_GE(kSchemaVersion, 15);
  for (const char* name : {"gradients", "projections", "gradients_run_rank", "projections_run", "projections_measured"})
    EXPECT_EQ(raw.integer(std::string("SELECT count(*) FROM sqlite_master WHERE name = '") + name + "'"), 1) << name;
  // Their rows go with their run...
  for (const char* table : {"gradients", "projections"})
    EXPECT_EQ(raw.integer(std::string("SELECT count(*) FROM pragma_foreign_key_list('") + table +
                          "') WHERE \"table\" = 'runs' AND \"from\" = 'run_id' AND on_delete = 'CASCADE'"),
              1)
        << table;
  // ...and a projection's inputs are plain ids: no other foreign key.
  EXPECT_EQ(raw.integer("SELECT count(*) FROM pragma_foreign_key_list('projections')"), 1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM pragma_index_info('gradients_run_rank')"), 4);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM pragma_index_info('projections_measured') WHERE name = "
                        "'measured_run_id'"),
            1);
}

TEST(StoreProjection, GradientsReadBackByRankGroupSlot) {
  ts::testing::ScratchDir dir("ts_projection_store");
  const fs::path db = dir / "runs.db";
  Runs runs;
  {
    Writer w(db);
    runs = write_runs(w);
  }
  Reader r(db);
  EXPECT_TRUE(same_rows(r.gradients(runs.source), kRank0));  // rank 0 by default
  EXPECT_TRUE(same_rows(r.gradients(runs.source, 0), kRank0));
  EXPECT_TRUE(same_rows(r.gradients(runs.source, 1), kRank1));
  std::vector<GradientRow> every = kRank0;
  every.insert(every.end(), kRank1.begin(), kRank1.end());
  const auto all = r.gradients(runs.source, std::nullopt);
  EXPECT_TRUE(same_rows(all, every));
  ASSERT_EQ(all.size(), kGradients.size());
  EXPECT_EQ(all.front().name, "generator.0.weight");
  EXPECT_EQ(all.front().bytes, 65536);
  EXPECT_EQ(all.back().rank, 1);
  EXPECT_EQ(all.back().group, 1);
  EXPECT_EQ(all.back().slot, 1);
  EXPECT_TRUE(r.gradients(runs.source, 2).empty());
  EXPECT_TRUE(r.gradients(runs.measured, std::nullopt).empty());  // a run without them has none
}

TEST(StoreProjection, ProjectionsReadBackWithEveryField) {
  ts::testing::ScratchDir dir("ts_projection_store");
  const fs::path db = dir / "runs.db";
  Runs runs;
  ProjectionRow measured, nominal, again;
  int64_t other = 0;
  {
    Writer w(db);
    runs = write_runs(w);
    other = w.begin_run(run_of("wgan", 4, "projection"));
    const int64_t third = w.begin_run(run_of("wgan", 8, "projection"));
    measured = projection(runs.projected, runs.source, runs.sweep, runs.measured);
    nominal = projection(other, runs.source, 0, 0);
    again = projection(third, runs.source, runs.sweep, runs.measured);
    again.ranks = 8;
    again.error = -0.25;
    measured.id = w.add_projection(measured);
    nominal.id = w.add_projection(nominal);
    again.id = w.add_projection(again);
  }
  EXPECT_GT(measured.id, 0);
  EXPECT_GT(nominal.id, measured.id);
  EXPECT_GT(again.id, nominal.id);
  ASSERT_TRUE(measured.error.has_value());
  EXPECT_NEAR(*measured.error, 0.0250000125, 1e-12);
  EXPECT_FALSE(nominal.error.has_value());

  Reader r(db);
  const auto all = r.projections();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(same(all[0], measured));
  EXPECT_TRUE(same(all[1], nominal));
  EXPECT_TRUE(same(all[2], again));
  EXPECT_EQ(all[0].id, measured.id);
  EXPECT_EQ(all[1].id, nominal.id);
  EXPECT_EQ(all[2].id, again.id);
  // Every field as written, spelled out once.
  EXPECT_EQ(all[0].run_id, runs.projected);
  EXPECT_EQ(all[0].source_run_id, runs.source);
  EXPECT_EQ(all[0].sweep_run_id, runs.sweep);
  EXPECT_EQ(all[0].measured_run_id, runs.measured);
  EXPECT_EQ(all[0].strategy, "allreduce");
  EXPECT_EQ(all[0].ranks, 4);
  EXPECT_EQ(all[0].link, "fitted to run " + std::to_string(runs.sweep));
  EXPECT_EQ(all[0].latency_ns, 12'500.25);
  EXPECT_EQ(all[0].bandwidth_gbps, 1.1875);
  EXPECT_EQ(all[0].knobs_json, R"({"bucket_bytes":26214400,"overlap":true})");
  EXPECT_EQ(all[0].model_json, R"({"link":{"alpha_ns":12500.25,"beta_gbps":1.1875},"compute":"as measured"})");
  EXPECT_EQ(all[0].projected_ns, 41'000'000.5);
  EXPECT_EQ(all[0].measured_ns, 40'000'000.0);
  ASSERT_TRUE(all[0].error.has_value());
  EXPECT_DOUBLE_EQ(*all[0].error, 41'000'000.5 / 40'000'000.0 - 1);
  EXPECT_EQ(all[0].created_at, "2026-12-10T01:02:03Z");
  // Not measured: no error, measured_ns -1, no inputs but the source.
  EXPECT_FALSE(all[1].error.has_value());
  EXPECT_EQ(all[1].measured_ns, -1);
  EXPECT_EQ(all[1].measured_run_id, 0);
  EXPECT_EQ(all[1].sweep_run_id, 0);
  EXPECT_EQ(all[1].strategy, "ps");
  EXPECT_EQ(all[1].link, "nominal 10 GbE");
  EXPECT_EQ(*all[2].error, -0.25);
  {
    Raw raw(db);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM projections WHERE error IS NULL"), 1);
  }

  const auto of = r.projection_of(runs.projected);
  ASSERT_TRUE(of.has_value());
  EXPECT_EQ(of->id, measured.id);
  EXPECT_TRUE(same(*of, measured));
  const auto of_other = r.projection_of(other);
  ASSERT_TRUE(of_other.has_value());
  EXPECT_EQ(of_other->id, nominal.id);
  EXPECT_FALSE(r.projection_of(runs.source).has_value());  // its input, not a projection
  EXPECT_FALSE(r.projection_of(runs.projected + 100).has_value());

  const auto ledger = r.projections_of_measured(runs.measured);
  ASSERT_EQ(ledger.size(), 2u);
  EXPECT_EQ(ledger[0].id, measured.id);
  EXPECT_EQ(ledger[1].id, again.id);
  EXPECT_TRUE(same(ledger[1], again));
  EXPECT_TRUE(r.projections_of_measured(runs.source).empty());
  EXPECT_TRUE(r.projections_of_measured(0).empty()) << "0 is no measured run, not the unmeasured projections";
}

TEST(StoreProjection, AMissingRunIsNotFoundAndNothingIsWritten) {
  ts::testing::ScratchDir dir("ts_projection_store");
  const fs::path db = dir / "runs.db";
  {
    Writer w(db);
    const Runs runs = write_runs(w);
    EXPECT_EQ(ts::testing::error_kind([&] { w.add_gradients(runs.projected + 10, kGradients); }),
              StoreError::Kind::not_found);
    EXPECT_EQ(ts::testing::error_kind(
                  [&] { w.add_projection(projection(runs.projected + 10, runs.source, runs.sweep, runs.measured)); }),
              StoreError::Kind::not_found);
    // Inside a Writer::Transaction too; the transaction's earlier writes roll back with it.
    EXPECT_EQ(ts::testing::error_kind([&] {
                Writer::Transaction tx(w);
                w.add_projection(projection(runs.projected, runs.source, 0, 0));
                w.add_projection(projection(runs.projected + 10, runs.source, 0, 0));
                tx.commit();
              }),
              StoreError::Kind::not_found);
  }
  Raw raw(db);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM projections"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM gradients"), static_cast<int64_t>(kGradients.size()));
}

TEST(StoreProjection, AddProjectionJoinsAnOpenTransaction) {
  ts::testing::ScratchDir dir("ts_projection_store");
  const fs::path db = dir / "runs.db";
  int64_t kept = 0;
  {
    Writer w(db);
    const Runs runs = write_runs(w);
    {
      Writer::Transaction tx(w);
      w.add_projection(projection(runs.projected, runs.source, runs.sweep, runs.measured));
    }  // not committed: rolled back
    Writer::Transaction tx(w);
    const int64_t run = w.begin_run(run_of("wgan", 2, "projection"));
    kept = w.add_projection(projection(run, runs.source, 0, 0));
    w.add_gradients(run, kRank1);
    tx.commit();
  }
  Reader r(db);
  const auto all = r.projections();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, kept);
  EXPECT_EQ(all[0].strategy, "ps");
}

TEST(StoreProjection, DeletingTheProjectionsRunDeletesItsRowButDeletingAnInputDoesNot) {
  ts::testing::ScratchDir dir("ts_projection_store");
  const fs::path db = dir / "runs.db";
  Runs runs;
  int64_t gone = 0, gone_id = 0, kept_id = 0;
  {
    Writer w(db);
    runs = write_runs(w);
    gone = w.begin_run(run_of("wgan", 4, "projection"));
    kept_id = w.add_projection(projection(runs.projected, runs.source, runs.sweep, runs.measured));
    gone_id = w.add_projection(projection(gone, runs.source, runs.sweep, runs.measured));
    w.delete_run(gone);         // the projection's own run: its row goes with it
    w.delete_run(runs.source);  // inputs: the ledger stays
    w.delete_run(runs.measured);
    w.delete_run(runs.sweep);
  }
  Reader r(db);
  const auto all = r.projections();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, kept_id);
  EXPECT_NE(all[0].id, gone_id);
  EXPECT_FALSE(r.projection_of(gone).has_value());
  // The kept row still names its inputs, which readers find gone.
  EXPECT_EQ(all[0].source_run_id, runs.source);
  EXPECT_EQ(all[0].measured_run_id, runs.measured);
  EXPECT_FALSE(r.run(all[0].source_run_id).has_value());
  EXPECT_EQ(r.projections_of_measured(runs.measured).size(), 1u);
  EXPECT_TRUE(r.gradients(runs.source, std::nullopt).empty());  // the source's gradients went with it
  Raw raw(db);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM gradients"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM projections"), 1);
}

TEST(StoreImport, CopiesGradientsAndTheProjectionRow) {
  ts::testing::ScratchDir dir("ts_projection_store");
  const fs::path from_db = dir / "from.db", to_db = dir / "to.db";
  Runs runs;
  ProjectionRow written;
  {
    Writer w(from_db);
    runs = write_runs(w);
    w.add_gradients(runs.projected, kRank1);
    written = projection(runs.projected, runs.source, runs.sweep, runs.measured);
    written.id = w.add_projection(written);
    w.finish_run(runs.projected, RunStatus::completed, "2026-12-10T00:05:00Z", "");
  }
  int64_t source_copy = 0, projection_copy = 0;
  {
    Writer to(to_db);
    for (int i = 0; i < 3; ++i) to.begin_run(run_of("resnet50"));  // there already: the copies get other ids
    Reader from(from_db);
    source_copy = copy_run(from, runs.source, to);
    projection_copy = copy_run(from, runs.projected, to);
  }
  EXPECT_NE(source_copy, runs.source);
  EXPECT_NE(projection_copy, runs.projected);
  Reader b(to_db);
  std::vector<GradientRow> every = kRank0;
  every.insert(every.end(), kRank1.begin(), kRank1.end());
  EXPECT_TRUE(same_rows(b.gradients(source_copy, std::nullopt), every));
  EXPECT_TRUE(same_rows(b.gradients(projection_copy, std::nullopt), kRank1));
  EXPECT_FALSE(b.projection_of(source_copy).has_value());  // a run that is not a projection has no row
  const auto copied = b.projection_of(projection_copy);
  ASSERT_TRUE(copied.has_value());
  // The row as written, on the copy's run, its inputs (runs of the other db) dropped.
  ProjectionRow expected = written;
  expected.run_id = projection_copy;
  expected.source_run_id = expected.sweep_run_id = expected.measured_run_id = 0;
  EXPECT_TRUE(same(*copied, expected));
  EXPECT_EQ(copied->projected_ns, 41'000'000.5);
  ASSERT_TRUE(copied->error.has_value());
  EXPECT_DOUBLE_EQ(*copied->error, *written.error);
  EXPECT_EQ(b.projections().size(), 1u);
  // Merged over itself (a spill replacing its streamed part): nothing is doubled.
  {
    Writer to(to_db);
    Reader from(from_db);
    EXPECT_EQ(copy_run(from, runs.projected, to, projection_copy), projection_copy);
  }
  Reader c(to_db);
  const auto all = c.projections();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].run_id, projection_copy);
  EXPECT_TRUE(same_rows(c.gradients(projection_copy, std::nullopt), kRank1));
}

// A v14 file with a run: read as it is (no rows), then migrated to v15 by a writer, after which
// the run is there as it was, both tables are empty, and new rows are stored as any.
TEST(StoreProjection, AVersionFourteenFileMigratesWithBothTablesEmpty) {
  ts::testing::ScratchDir dir("ts_projection_store");
  const fs::path db = dir / "v14.db";
  ts::store::test_support::write_old_file(db, 14, 2);
  {
    Raw raw(db);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name IN ('gradients', 'projections')"), 0);
  }
  {
    Reader r(db);  // never migrates
    EXPECT_EQ(r.schema_version(), 14);
    EXPECT_TRUE(r.gradients(1, std::nullopt).empty());
    EXPECT_TRUE(r.projections().empty());
    EXPECT_FALSE(r.projection_of(1).has_value());
    EXPECT_TRUE(r.projections_of_measured(1).empty());
  }
  int64_t projected = 0;
  {
    Writer w(db);  // migrates
    Raw raw(db);
    EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM gradients"), 0);
    EXPECT_EQ(raw.integer("SELECT count(*) FROM projections"), 0);
    projected = w.begin_run(run_of("resnet50", 2, "projection"));
    w.add_gradients(1, kRank1);
    w.add_projection(projection(projected, 1, 0, 1));
  }
  Reader r(db);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  const auto old = r.run(1);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->workload, "resnet50");
  EXPECT_EQ(old->ranks, 2);
  EXPECT_EQ(old->status, RunStatus::completed);
  EXPECT_EQ(old->framework, "trainscope");
  EXPECT_EQ(r.runs().size(), 2u);
  EXPECT_TRUE(same_rows(r.gradients(1, 1), kRank1));
  const auto ledger = r.projections_of_measured(1);
  ASSERT_EQ(ledger.size(), 1u);
  EXPECT_EQ(ledger[0].run_id, projected);
  EXPECT_EQ(r.projection_of(projected)->source_run_id, 1);
}
