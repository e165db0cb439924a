// The run row's life (session/run_record.h) against a temporary db: begun at once with this
// process as its writer, heartbeats with rows, one verdict that a later one does not overwrite,
// the final write all or nothing, and a db that refuses it (locked by another writer): the
// whole run in a side file, with the same verdict, and the way to merge it said.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "session/run_record.h"
#include "store/reader.h"
#include "store/writer.h"
#include "tests/support/files.h"

using ts::session::RunRecord;
using ts::store::Reader;
using ts::store::RunStatus;
using ts::store::Writer;
using namespace std::chrono_literals;

namespace {

ts::store::RunInfo info() {
  ts::store::RunInfo i;
  i.workload = "resnet50";
  i.preset = "tiny";
  i.device = "cpu";
  i.batch_size = 2;
  i.iterations = 3;
  i.config_json = "{}";
  return i;
}

ts::store::RunFlush two_iterations() {
  ts::store::RunFlush f;
  f.iterations.push_back({0, true, 100, 200, 2, 1.5});
  f.iterations.push_back({1, false, 200, 300, 2, 1.25});
  return f;
}

const std::vector<ts::store::MetricRow> kMetric = {{"final_rows", 1, "flag", -1}};

}  // namespace

TEST(RunRecord, BeginsAtOnceAsThisProcesssRun) {
  ts::testing::ScratchDir dir("ts_run_record");
  const auto db = dir / "runs.db";
  RunRecord record(db, 1s, info());
  const std::vector<ts::store::EnvEntry> env = {{"k", "v"}};
  record.add_environment(env);
  Reader r(db);
  const auto row = r.run(record.id());
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->status, RunStatus::running);
  EXPECT_FALSE(row->started_at.empty());
  EXPECT_EQ(row->pid, ::getpid());
  EXPECT_EQ(row->workload, "resnet50");
  ASSERT_EQ(r.environment(record.id()).size(), 1u);
}

TEST(RunRecord, HeartbeatsWriteRowsAndSayTheWriterLives) {
  ts::testing::ScratchDir dir("ts_run_record");
  const auto db = dir / "runs.db";
  RunRecord record(db, 1s, info());
  EXPECT_EQ(Reader(db).run(record.id())->heartbeat_ms, 0);
  record.heartbeat(two_iterations());
  Reader r(db);
  EXPECT_GT(r.run(record.id())->heartbeat_ms, 0);
  EXPECT_EQ(r.iterations(record.id()).size(), 2u);
}

TEST(RunRecord, TheFirstVerdictStays) {
  ts::testing::ScratchDir dir("ts_run_record");
  const auto db = dir / "runs.db";
  RunRecord record(db, 1s, info());
  record.finish(RunStatus::interrupted, "stopped");
  EXPECT_FALSE(record.finish_if_running(RunStatus::failed, "late"));
  EXPECT_FALSE(RunRecord::finish_elsewhere(db, record.id(), RunStatus::failed, "later", 1s));
  const auto row = Reader(db).run(record.id());
  EXPECT_EQ(row->status, RunStatus::interrupted);
  EXPECT_EQ(row->error, "stopped");
  EXPECT_FALSE(row->ended_at.empty());
}

TEST(RunRecord, AnotherProcessMarksARunStillRunning) {
  ts::testing::ScratchDir dir("ts_run_record");
  const auto db = dir / "runs.db";
  RunRecord record(db, 1s, info());
  EXPECT_TRUE(RunRecord::finish_elsewhere(db, record.id(), RunStatus::failed, "a rank died", 1s));
  EXPECT_EQ(Reader(db).run(record.id())->status, RunStatus::failed);
  EXPECT_EQ(Reader(db).run(record.id())->error, "a rank died");
}

TEST(RunRecord, TheFinalWriteStoresRowsAndVerdictTogether) {
  ts::testing::ScratchDir dir("ts_run_record");
  const auto db = dir / "runs.db";
  RunRecord record(db, 1s, info());
  bool spilled = false;
  std::string told;
  const auto stored = record.store_final([](Writer& w, int64_t id) { w.add_metrics(id, kMetric); },
                                         [&](Writer&, int64_t) { spilled = true; }, RunStatus::completed, "",
                                         [&](const std::string& t) { told += t; });
  EXPECT_FALSE(spilled);
  EXPECT_TRUE(told.empty()) << told;
  EXPECT_EQ(stored.status, RunStatus::completed);
  EXPECT_TRUE(stored.spill_file.empty());
  Reader r(db);
  EXPECT_EQ(r.run(record.id())->status, RunStatus::completed);
  EXPECT_EQ(r.metrics(record.id()).size(), 1u);
}

TEST(RunRecord, ADbThatRefusesTheFinalWriteSpillsTheWholeRun) {
  ts::testing::ScratchDir dir("ts_run_record");
  const auto db = dir / "runs.db";
  RunRecord record(db, 200ms, info());
  std::string told;
  RunRecord::Stored stored;
  {
    Writer other(db);
    Writer::Transaction holds_the_lock(other);  // another writer: the db stays locked
    stored = record.store_final([](Writer& w, int64_t id) { w.add_metrics(id, kMetric); },
                                [](Writer& w, int64_t id) {
                                  w.flush(id, two_iterations());
                                  w.add_metrics(id, kMetric);
                                },
                                RunStatus::interrupted, "stopped", [&](const std::string& t) { told += t; });
  }
  ASSERT_FALSE(stored.spill_file.empty());
  EXPECT_EQ(stored.spill_file, ts::session::spill_path(db, record.id()));
  EXPECT_EQ(stored.status, RunStatus::interrupted);
  EXPECT_EQ(stored.error, "stopped");
  EXPECT_NE(told.find("could not store run"), std::string::npos) << told;
  EXPECT_NE(told.find("trainscope import '" + stored.spill_file.string() + "'"), std::string::npos) << told;
  // Nothing of the final write reached the db; the side file has all of it, with the verdict.
  Reader main(db);
  EXPECT_EQ(main.run(record.id())->status, RunStatus::running);
  EXPECT_TRUE(main.metrics(record.id()).empty());
  Reader side(stored.spill_file);
  ASSERT_EQ(side.runs().size(), 1u);
  const auto run = side.runs().front();
  EXPECT_EQ(run.status, RunStatus::interrupted);
  EXPECT_EQ(run.error, "stopped");
  EXPECT_EQ(run.started_at, main.run(record.id())->started_at);
  EXPECT_EQ(side.iterations(run.id).size(), 2u);
  EXPECT_EQ(side.metrics(run.id).size(), 1u);
}

TEST(RunRecord, WhenTheSpillFailsTooTheRunFailsAndSaysWhy) {
  ts::testing::ScratchDir dir("ts_run_record");
  const auto db = dir / "runs.db";
  RunRecord record(db, 1s, info());
  std::string told;
  const auto stored = record.store_final([](Writer&, int64_t) { throw std::runtime_error("disk full"); },
                                         [](Writer&, int64_t) { throw std::runtime_error("no room"); },
                                         RunStatus::completed, "", [&](const std::string& t) { told += t; });
  EXPECT_TRUE(stored.spill_file.empty());
  EXPECT_EQ(stored.status, RunStatus::failed);
  EXPECT_EQ(stored.error, "storing results: disk full");
  EXPECT_NE(told.find("could not write them to"), std::string::npos) << told;
  // The verdict alone, once more: the db takes it.
  const auto row = Reader(db).run(record.id());
  EXPECT_EQ(row->status, RunStatus::failed);
  EXPECT_EQ(row->error, "storing results: disk full");
}
