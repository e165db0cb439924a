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

// A running run written by `here` (this process), flushing every 2 s, last at `heartbeat_ms`.
RunRow running_here(const ProcessIdentity& here, int64_t heartbeat_ms) {
  RunRow run;
  run.status = RunStatus::running;
  run.host = here.host;
  run.boot_id = here.boot_id;
  run.pid = here.pid;
  run.pid_start = here.pid_start;
  run.heartbeat_interval_ms = 2000;
  run.heartbeat_ms = heartbeat_ms;
  return run;
}

TEST(StoreLiveness, DecidedByTheWritersIdentityAndHeartbeat) {
  const ProcessIdentity here = current_process();
  ASSERT_GT(here.pid_start, 0);
  ASSERT_FALSE(here.boot_id.empty());
  const int64_t now = 1'800'000'000'000;
  const RunRow run = running_here(here, now - 3'000);
  EXPECT_EQ(liveness(run, here, now).state, Liveness::live);
  RunRow silent = run;  // an hour old: the process is there, but stopped or hung (issue 39)
  silent.heartbeat_ms = now - 3'600'000;
  EXPECT_EQ(liveness(silent, here, now).state, Liveness::stalled);
  EXPECT_NE(liveness(silent, here, now).why.find("has not written for 3600 s"), std::string::npos)
      << liveness(silent, here, now).why;

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

  // A heartbeat from a host whose clock is ahead of this one's (issue 39): its age cannot be told
  // from it; the db file's last write, by this host's clock, decides, and the skew is said.
  RunRow ahead = remote;
  ahead.heartbeat_interval_ms = 2000;
  ahead.heartbeat_ms = now + 600'000;
  ahead.db_written_ms = now - 2'000;
  EXPECT_EQ(liveness(ahead, here, now).state, Liveness::live);
  EXPECT_NE(liveness(ahead, here, now).why.find("clock is at least 600 s ahead"), std::string::npos)
      << liveness(ahead, here, now).why;
  ahead.db_written_ms = now - 120'000;  // dead for two minutes, its heartbeat still "in the future"
  EXPECT_EQ(liveness(ahead, here, now).state, Liveness::lost) << liveness(ahead, here, now).why;
  ahead.db_written_ms = 0;
  EXPECT_EQ(liveness(ahead, here, now).state, Liveness::unknown);

  RunRow old = run;  // before schema v3: no writer identity
  old.pid = 0;
  EXPECT_EQ(liveness(old, here, now).state, Liveness::unknown);

  RunRow done = run;
  done.status = RunStatus::completed;
  EXPECT_EQ(liveness(done, here, now).state, Liveness::finished);
}

// A run whose heartbeat goes on but whose iterations stopped (issue 39) is stalled, on this host
// and on another (both times on the writer's clock: no skew enters).
TEST(StoreLiveness, AHeartbeatWithoutProgressIsStalled) {
  const ProcessIdentity here = current_process();
  const int64_t now = 1'800'000'000'000;
  RunRow run = running_here(here, now - 1'000);
  run.stall_after_ms = 300'000;
  run.progress_ms = run.heartbeat_ms - 200'000;
  EXPECT_EQ(liveness(run, here, now).state, Liveness::live);
  run.progress_ms = run.heartbeat_ms - 400'000;
  EXPECT_EQ(liveness(run, here, now).state, Liveness::stalled);
  EXPECT_NE(liveness(run, here, now).why.find("no new iteration for 400 s"), std::string::npos)
      << liveness(run, here, now).why;
  EXPECT_EQ(status_label(run, liveness(run, here, now)), "stalled");
  RunRow remote = run;
  remote.host = here.host + "-elsewhere";
  EXPECT_EQ(liveness(remote, here, now).state, Liveness::stalled);
  remote.progress_ms = 0;  // before schema v9: nothing to tell
  EXPECT_EQ(liveness(remote, here, now).state, Liveness::live);
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
    other.uuid = new_run_uuid();  // as RunRecord gives it: its spill keeps it
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

// Import's identity (issue 39): a run is its uuid. Two runs one process starts in the same
// second (a suite's) are two runs, not one.
TEST(StoreImport, RunsStartedInTheSameSecondByOneProcessStayApart) {
  Dir dir;
  const fs::path from_db = dir.path / "from.db", to_db = dir.path / "to.db";
  {
    Writer w(from_db);
    const RunInfo info = info_of_this_process();  // the same writer, the same started_at
    for (int i = 0; i < 2; ++i) {
      const int64_t run = w.begin_run(info);
      w.flush(run, some_rows(0, 2 + i));
      w.finish_run(run, RunStatus::completed, "2026-11-24T00:01:00Z", "");
    }
    Writer(to_db).begin_run(info_of_this_process());  // and a third, in the target already
  }
  Reader from(from_db);
  const auto runs = from.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_NE(runs[0].uuid, runs[1].uuid);
  EXPECT_EQ(runs[0].uuid.size(), 36u);
  Writer target(to_db);
  Reader existing(to_db);
  for (const auto& run : runs) {
    EXPECT_FALSE(find_same_run(existing, run).has_value()) << "run " << run.id;
    copy_run(from, run.id, target);
  }
  Reader r(to_db);
  ASSERT_EQ(r.runs().size(), 3u);
  EXPECT_EQ(r.runs()[1].uuid, runs[0].uuid) << "the copy keeps its identity";
  EXPECT_EQ(r.iterations(r.runs()[2].id).size(), 3u);
}

// An older copy of a db (a run's partial snapshot while it ran) never replaces the completed
// run; the completed one replaces the partial; the same copy twice is there once.
TEST(StoreImport, NeverReplacesARunWithALessCompleteCopy) {
  Dir dir;
  const fs::path partial_db = dir.path / "partial.db", whole_db = dir.path / "whole.db";
  RunInfo info = info_of_this_process();
  info.uuid = new_run_uuid();
  {
    Writer partial(partial_db), whole(whole_db);
    const int64_t p = partial.begin_run(info);
    partial.flush(p, some_rows(0, 2));
    const int64_t w = whole.begin_run(info);
    whole.flush(w, some_rows(0, 6));
    whole.add_metrics(w, std::vector<MetricRow>{{"throughput_median", 42, "samples/s", -1}});
    whole.finish_run(w, RunStatus::completed, "2026-11-24T00:02:00Z", "");
  }
  Reader partial(partial_db), whole(whole_db);
  const RunRow p = partial.runs().front(), w = whole.runs().front();
  ASSERT_EQ(find_same_run(whole, p), w.id);
  const CopyChoice older = choose_copy(whole, w, partial, p);
  EXPECT_FALSE(older.replace);
  EXPECT_NE(older.why.find("kept the db's more complete copy (completed, 6 iterations"), std::string::npos)
      << older.why;
  const CopyChoice newer = choose_copy(partial, p, whole, w);
  EXPECT_TRUE(newer.replace) << newer.why;
  EXPECT_NE(newer.why.find("running, 2 iterations"), std::string::npos) << newer.why;
  EXPECT_FALSE(choose_copy(whole, w, whole, w).replace);
  EXPECT_EQ(choose_copy(whole, w, whole, w).why, "already there");
  // A copy that only got further (more iterations, still running) replaces the one behind it.
  {
    Writer more(dir.path / "more.db");
    more.flush(more.begin_run(info), some_rows(0, 4));
  }
  Reader more(dir.path / "more.db");
  EXPECT_TRUE(choose_copy(partial, p, more, more.runs().front()).replace);
}

// Runs written before schema v9 have no uuid: they are matched by their writer and start time.
TEST(StoreImport, RunsWithoutAUuidAreMatchedByTheirWriter) {
  Dir dir;
  const fs::path db = dir.path / "old.db";
  {
    Writer w(db);
    w.begin_run(info_of_this_process());
  }
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "UPDATE runs SET uuid = ''", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
  Reader r(db);
  RunRow run = r.runs().front();
  EXPECT_EQ(find_same_run(r, run), run.id);
  run.started_at = "2026-11-24T09:09:09Z";
  EXPECT_FALSE(find_same_run(r, run).has_value());
}

}  // namespace
