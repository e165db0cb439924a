// The store's side of streaming (schema v3): flushes with heartbeats, all-or-nothing
// transactions, liveness of a run from its writer's identity, copying runs (import), and the
// the run as another process sees it is in tests/cli/streaming_test.cpp.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>

#include "store/import.h"
#include "store/liveness.h"
#include "store/open.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/writer.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::store;

namespace {

struct Dir {
  ts::testing::ScratchDir scratch{"ts_stream_store"};
  const fs::path& path = scratch.path();
};

RunInfo info_of_this_process() {
  RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cpu";
  info.started_at = "2026-11-24T00:00:00Z";
  const ProcessIdentity me = current_process();
  info.host = me.host;
  info.boot_id = me.boot_id;
  info.pid = me.pid;
  info.pid_start = me.pid_start;
  info.heartbeat_interval_ms = 2000;
  return info;
}

RunFlush some_rows(int64_t first_iteration, int64_t n) {
  RunFlush f;
  for (int64_t i = first_iteration; i < first_iteration + n; ++i) {
    f.iterations.push_back({i, false, i * 100, i * 100 + 90, 4, 1.0});
    f.phases.push_back({i, "forward", i * 100, i * 100 + 40});
    f.events.push_back({i * 100, i * 100 + 90, "iteration", "", "iteration", "none", i, 0});
    f.events.push_back({i * 100, i * 100 + 40, "forward", "", "phase", "none", i, 0});
    f.samples.push_back({i * 100, "rss_bytes", 1e6});
    f.memory.push_back({i * 100, "weights", 1000 + i});
  }
  f.heartbeat_ms = unix_time_ms();
  return f;
}

TEST(StoreStreaming, FlushesAppendRowsAndBeatTheHeart) {
  Dir dir;
  const fs::path db = dir.path / "runs.db";
  Writer w(db);
  const int64_t run = w.begin_run(info_of_this_process());
  RunFlush first = some_rows(0, 3);
  first.heartbeat_ms = 1000;
  w.flush(run, first);
  RunFlush second = some_rows(3, 2);
  second.heartbeat_ms = 2000;
  w.flush(run, second);
  RunFlush nothing;  // heartbeat 0: the last one stays
  w.flush(run, nothing);
  Reader r(db);
  EXPECT_EQ(r.iterations(run).size(), 5u);
  EXPECT_EQ(r.phases(run).size(), 5u);
  EXPECT_EQ(r.event_count(run), 10);
  EXPECT_EQ(r.samples(run).size(), 5u);
  EXPECT_EQ(r.run(run)->heartbeat_ms, 2000);
  EXPECT_EQ(r.run(run)->pid, ::getpid());
  EXPECT_THROW(w.flush(run + 1, first), StoreError);  // no such run
}

// A streamed enclosing range reaches the db after what it contains: readers still put it first.
TEST(StoreStreaming, EventsOfEqualStartComeEnclosingFirst) {
  Dir dir;
  const fs::path db = dir.path / "runs.db";
  Writer w(db);
  const int64_t run = w.begin_run(info_of_this_process());
  RunFlush inner, outer;
  inner.events.push_back({100, 150, "conv2d", "conv1", "op", "forward", 0, 0});
  outer.events.push_back({100, 900, "iteration", "", "iteration", "none", 0, 0});
  w.flush(run, inner);
  w.flush(run, outer);
  const auto events = Reader(db).events(run);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "iteration");
  EXPECT_EQ(events[1].name, "conv2d");
}

TEST(StoreStreaming, ATransactionIsAllOrNothing) {
  Dir dir;
  const fs::path db = dir.path / "runs.db";
  Writer w(db);
  const int64_t run = w.begin_run(info_of_this_process());
  {
    Writer::Transaction tx(w);
    w.flush(run, some_rows(0, 4));
    w.add_metrics(run, std::vector<MetricRow>{{"loss_last", 1.0, "", -1}});
    w.finish_run(run, RunStatus::completed, "2026-11-24T00:01:00Z", "");
    EXPECT_THROW(Writer::Transaction nested(w), std::logic_error);
    // no commit: everything above rolls back
  }
  {
    Reader r(db);
    EXPECT_TRUE(r.iterations(run).empty());
    EXPECT_TRUE(r.metrics(run).empty());
    EXPECT_EQ(r.run(run)->status, RunStatus::running);
  }
  {
    Writer::Transaction tx(w);  // strings interned in the rolled-back one are written again
    w.flush(run, some_rows(0, 4));
    w.finish_run(run, RunStatus::completed, "2026-11-24T00:01:00Z", "");
    tx.commit();
  }
  Reader r(db);
  EXPECT_EQ(r.iterations(run).size(), 4u);
  EXPECT_EQ(r.events(run).front().name, "iteration");
  EXPECT_EQ(r.run(run)->status, RunStatus::completed);
  EXPECT_FALSE(w.finish_if_running(run, RunStatus::interrupted, "", "late"));  // finished stays finished
  EXPECT_EQ(Reader(db).run(run)->status, RunStatus::completed);
}

TEST(StoreStreaming, TheStreamedMemoryTimelineIsReplacedByTheWholeRuns) {
  Dir dir;
  const fs::path db = dir.path / "runs.db";
  Writer w(db);
  const int64_t run = w.begin_run(info_of_this_process());
  w.flush(run, some_rows(0, 5));
  const std::vector<MemoryPoint> whole = {{10, "weights", 7}, {20, "activations", 8}};
  w.replace_memory_timeline(run, whole);
  const auto points = Reader(db).memory_timeline(run);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].live_bytes, 7);
  EXPECT_EQ(points[1].category, "activations");
}

TEST(StoreLiveness, DecidedByTheWritersIdentityAndHeartbeat) {
  const ProcessIdentity here = current_process();
  ASSERT_GT(here.pid_start, 0);
  ASSERT_FALSE(here.boot_id.empty());
  const int64_t now = 1'800'000'000'000;
  RunRow run;
  run.status = RunStatus::running;
  run.host = here.host;
  run.boot_id = here.boot_id;
  run.pid = here.pid;
  run.pid_start = here.pid_start;
  run.heartbeat_interval_ms = 2000;
  run.heartbeat_ms = now - 3'600'000;  // an hour old: on this host the pid decides, not the age
  EXPECT_EQ(liveness(run, here, now).state, Liveness::live);

  RunRow reused = run;  // the same pid, another process (started at another time)
  reused.pid_start = here.pid_start + 1;
  EXPECT_EQ(liveness(reused, here, now).state, Liveness::lost);

  // A child that has exited and been reaped: its pid names no process.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  RunRow dead = run;
  dead.pid = child;
  EXPECT_EQ(liveness(dead, here, now).state, Liveness::lost);
  EXPECT_NE(liveness(dead, here, now).why.find("gone"), std::string::npos);

  RunRow rebooted = run;
  rebooted.boot_id = "another-boot";
  EXPECT_EQ(liveness(rebooted, here, now).state, Liveness::lost);

  RunRow remote = run;  // another host: only the heartbeat's age can tell
  remote.host = here.host + "-elsewhere";
  remote.boot_id = "its-boot";
  remote.heartbeat_ms = now - 5'000;
  EXPECT_EQ(liveness(remote, here, now).state, Liveness::live);
  remote.heartbeat_ms = now - 61'000;
  EXPECT_EQ(liveness(remote, here, now).state, Liveness::lost);
  remote.heartbeat_interval_ms = 30'000;  // a slow writer gets 5 intervals
  remote.heartbeat_ms = now - 140'000;
  EXPECT_EQ(liveness(remote, here, now).state, Liveness::live);

  RunRow old = run;  // before schema v3: no writer identity
  old.pid = 0;
  EXPECT_EQ(liveness(old, here, now).state, Liveness::unknown);

  RunRow done = run;
  done.status = RunStatus::completed;
  EXPECT_EQ(liveness(done, here, now).state, Liveness::finished);
}

// A version-2 file: migrated to v3 keeping its runs, which read as written without heartbeats.
TEST(StoreLiveness, AVersionTwoFileIsMigratedAndItsRunsAreUnknown) {
  Dir dir;
  const fs::path db = dir.path / "v2.db";
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    const std::string sql =
        std::string(detail::migration_sql(0)) + std::string(detail::migration_sql(1)) +
        "PRAGMA user_version = 2; PRAGMA application_id = " + std::to_string(kApplicationId) +
        ";INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, "
        "trace, parameter_count, started_at, command_line, config_json, status) VALUES ('resnet50', "
        "'tiny', 'cpu', 8, 2, 1, 1, 1, 1, 100, '2026-11-22T00:00:00Z', 'x', '{}', 'running');";
    ASSERT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(h);
  }
  EXPECT_EQ(liveness(Reader(db).runs().front()).state, Liveness::unknown);  // read as v2
  { Writer w(db); }
  Reader r(db);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  ASSERT_EQ(r.runs().size(), 1u);
  EXPECT_EQ(r.runs().front().pid, 0);
  EXPECT_EQ(liveness(r.runs().front()).state, Liveness::unknown);
}

TEST(StoreImport, CopiesARunWholeAndReplacesItsStreamedPart) {
  Dir dir;
  const fs::path main_db = dir.path / "main.db", side_db = dir.path / "side.db";
  const RunInfo info = info_of_this_process();
  int64_t streamed = 0;
  {
    Writer w(main_db);
    w.begin_run(info);  // an unrelated run first
    RunInfo other = info;
    other.started_at = "2026-11-24T00:00:05Z";
    streamed = w.begin_run(other);
    w.flush(streamed, some_rows(0, 2));  // what was streamed before the db locked
    Writer side(side_db);
    const int64_t whole = side.begin_run(other);
    side.flush(whole, some_rows(0, 6));
    side.add_metrics(whole, std::vector<MetricRow>{{"throughput_median", 42, "samples/s", -1}});
    side.finish_run(whole, RunStatus::completed, "2026-11-24T00:02:00Z", "");
  }
  Reader side(side_db);
  Writer target(main_db);
  Reader existing(main_db);
  const auto same = find_same_run(existing, side.runs().front());
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(*same, streamed);
  EXPECT_EQ(copy_run(side, side.runs().front().id, target, *same), streamed);
  Reader r(main_db);
  ASSERT_EQ(r.runs().size(), 2u);
  EXPECT_EQ(r.run(streamed)->status, RunStatus::completed);
  EXPECT_EQ(r.iterations(streamed).size(), 6u);
  EXPECT_EQ(r.metrics(streamed).size(), 1u);
  EXPECT_EQ(r.event_count(streamed), 12);
  // A run from nowhere in the target is added as a new run.
  const int64_t copy = copy_run(side, side.runs().front().id, target);
  EXPECT_EQ(copy, 3);
  EXPECT_EQ(Reader(main_db).iterations(copy).size(), 6u);
}

}  // namespace
