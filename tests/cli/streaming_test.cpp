// A run is written while it runs: killed at any moment (kill -9, a second Ctrl-C) it leaves a
// valid db, its run marked, with everything up to its last flush; a db locked at the final
// write costs nothing (the run goes to a side file that `trainscope import` merges).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_util.h"
#include "store/liveness.h"
#include "store/reader.h"
#include "store/writer.h"
#include "write_lock.h"

extern char** environ;

namespace {

using ts::testing::read_file;
using ts::testing::run_trainscope;
using ts::testing::TempDir;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The trainscope binary as a child we can signal; its stdout and stderr go to `log`.
class Child {
 public:
  Child(const std::vector<std::string>& args, const fs::path& log) {
    std::vector<std::string> argv = {TRAINSCOPE_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&pid_, TRAINSCOPE_BIN, &actions, nullptr, raw.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) pid_ = -1;
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { kill(pid_, sig); }
  // The exit code (128 + signal when killed), or -1 when it did not end within `limit`.
  int wait(std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Reads a db the way another process would, while it is being written: no trainscope cache.
int64_t count_rows(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  int64_t n = -1;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 2000);
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return n;
}

std::string integrity(const fs::path& db) {
  sqlite3* h = nullptr;
  std::string out = "cannot open";
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return out;
}

// Polls until `sql` counts at least `n` rows in db; false after `limit`.
bool wait_for_rows(const fs::path& db, const std::string& sql, int64_t n, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (fs::exists(db) && count_rows(db, sql) >= n) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Endless training (a fast tiny workload), written every 50 ms.
std::vector<std::string> endless_run(const fs::path& db) {
  // No warm-up: every iteration kept is a timed one, from which `show` computes the throughput.
  return {"run", "transformer",    "--iters", "1000000",          "--warmup", "0",    "--threads",
          "1",   "--eval-batches", "0",       "--flush-interval", "0.05",     "--db", db.string()};
}

TEST(Streaming, KillNineAtRandomMomentsKeepsAValidDbWithTheRunsMarkedLost) {
  TempDir dir;
  const fs::path db = dir / "runs.db";
  std::mt19937 rng(20261124);
  constexpr int kTrials = 20;
  int after_iterations = 0;  // trials killed once iterations had been seen in the db
  for (int trial = 0; trial < kTrials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t runs_before = fs::exists(db) ? count_rows(db, "SELECT count(*) FROM runs") : 0;
    Child child(endless_run(db), dir / "log");
    ASSERT_GT(child.pid(), 0);
    int64_t seen = 0;
    if (trial % 2 == 0) {
      // Anywhere from start-up (before or while the run row is written) into the first flushes.
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 1500)(rng)));
    } else {
      // Once some iterations are committed: they must survive the kill, whatever it interrupts.
      const std::string sql = "SELECT count(*) FROM iterations WHERE run_id > " + std::to_string(runs_before);
      ASSERT_TRUE(wait_for_rows(db, sql, 1, 60s)) << read_file(dir / "log");
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 400)(rng)));
      seen = count_rows(db, sql);
      ++after_iterations;
    }
    child.signal(SIGKILL);
    ASSERT_EQ(child.wait(10s), 128 + SIGKILL);
    if (!fs::exists(db)) continue;  // killed before the db was created: nothing to keep
    ASSERT_EQ(integrity(db), "ok");
    ts::store::Reader reader(db);
    const auto runs = reader.runs();
    if (static_cast<int64_t>(runs.size()) == runs_before) continue;  // killed before the run row
    ASSERT_EQ(static_cast<int64_t>(runs.size()), runs_before + 1);
    const auto& run = runs.back();
    EXPECT_EQ(run.status, ts::store::RunStatus::running);
    EXPECT_EQ(ts::store::liveness(run).state, ts::store::Liveness::lost) << ts::store::liveness(run).why;
    EXPECT_EQ(run.pid, child.pid());
    const auto its = reader.iterations(run.id);
    EXPECT_GE(static_cast<int64_t>(its.size()), seen);
    for (size_t i = 0; i < its.size(); ++i) ASSERT_EQ(its[i].index, static_cast<int64_t>(i));  // a prefix, no gaps
    for (const auto& p : reader.phases(run.id)) EXPECT_LT(p.iteration, static_cast<int64_t>(its.size()) + 1);
  }
  EXPECT_EQ(after_iterations, kTrials / 2);

  // The readers say what happened, and how much was kept.
  const auto runs = run_trainscope("runs --db " + db.string());
  EXPECT_EQ(runs.exit_code, 0) << runs.out;
  EXPECT_NE(runs.out.find("lost"), std::string::npos) << runs.out;
  EXPECT_EQ(runs.out.find("running"), std::string::npos) << runs.out;
  const int64_t last = ts::store::Reader(db).runs().back().id;
  const auto show = run_trainscope("show " + std::to_string(last) + " --db " + db.string());
  EXPECT_EQ(show.exit_code, 0) << show.out;
  EXPECT_TRUE(std::regex_search(show.out, std::regex("lost .*gone.*kept [1-9][0-9]* iterations?"))) << show.out;
  EXPECT_NE(show.out.find("throughput"), std::string::npos) << show.out;  // from the kept iterations

  // A db with lost runs takes new ones as before.
  const auto next = run_trainscope("run transformer --iters 2 --warmup 0 --threads 1 --db " + db.string());
  EXPECT_EQ(next.exit_code, 0) << next.out;
}

TEST(Streaming, FlushIntervalAndLockWaitAreChecked) {
  TempDir dir;
  for (const std::string bad :
       {"--flush-interval nan", "--flush-interval 0", "--flush-interval 601", "--lock-wait -1", "--lock-wait inf"}) {
    const auto r = run_trainscope("run transformer --iters 1 " + bad + " --db " + (dir / "runs.db").string());
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out;
  }
  EXPECT_FALSE(fs::exists(dir / "runs.db"));
}

TEST(Streaming, ALiveRunIsToldFromALostOne) {
  TempDir dir;
  const fs::path db = dir / "runs.db";
  Child child(endless_run(db), dir / "log");
  ASSERT_TRUE(wait_for_rows(db, "SELECT count(*) FROM iterations", 2, 60s)) << read_file(dir / "log");
  const auto live = run_trainscope("runs --db " + db.string());
  EXPECT_TRUE(std::regex_search(live.out, std::regex("running [0-9]+/1000000"))) << live.out;
  const auto heartbeat = ts::store::Reader(db).runs().front().heartbeat_ms;
  std::this_thread::sleep_for(300ms);
  EXPECT_GT(ts::store::Reader(db).runs().front().heartbeat_ms, heartbeat);  // it beats while it runs
  child.signal(SIGKILL);
  child.wait(10s);
  const auto lost = run_trainscope("runs --db " + db.string());
  EXPECT_NE(lost.out.find("lost"), std::string::npos) << lost.out;
}

TEST(Interrupts, ASecondCtrlCMarksTheRunInterruptedAndStopsAtOnce) {
  TempDir dir;
  const fs::path db = dir / "runs.db";
  // Slow iterations (batch 64), so the second Ctrl-C comes while the first waits for one to end.
  Child child({"run", "resnet50", "--batch", "64", "--iters", "1000", "--warmup", "0", "--threads", "1",
               "--flush-interval", "0.05", "--db", db.string()},
              dir / "log");
  ASSERT_TRUE(wait_for_rows(db, "SELECT count(*) FROM iterations", 1, 60s)) << read_file(dir / "log");
  child.signal(SIGINT);
  // Signals of one kind do not queue: the second must come after the first was taken.
  const auto seen = std::chrono::steady_clock::now() + 10s;
  while (read_file(dir / "log").find("Ctrl-C received") == std::string::npos && std::chrono::steady_clock::now() < seen)
    std::this_thread::sleep_for(1ms);
  child.signal(SIGINT);
  EXPECT_EQ(child.wait(20s), 130) << read_file(dir / "log");
  EXPECT_EQ(integrity(db), "ok");
  ts::store::Reader reader(db);
  const auto run = reader.runs().front();
  EXPECT_EQ(run.status, ts::store::RunStatus::interrupted) << run.error;
  EXPECT_NE(run.error.find("second interrupt"), std::string::npos) << run.error;  // marked by the watcher
  EXPECT_GE(reader.iterations(run.id).size(), 1u);
}

TEST(Interrupts, CtrlCStopsEvaluationAndMarksTheRun) {
  TempDir dir;
  const fs::path db = dir / "runs.db";
  // One training iteration, then an evaluation far longer than the test's patience (synthetic
  // images have no end; the translation sets would end theirs at the held-out set's size).
  Child child({"run", "resnet50", "--iters", "1", "--warmup", "0", "--threads", "1", "--eval-batches", "1000000",
               "--flush-interval", "0.05", "--db", db.string()},
              dir / "log");
  ASSERT_TRUE(wait_for_rows(db, "SELECT count(*) FROM iterations", 1, 60s)) << read_file(dir / "log");
  std::this_thread::sleep_for(500ms);  // into the evaluation
  child.signal(SIGINT);
  EXPECT_EQ(child.wait(30s), 130) << read_file(dir / "log");
  ts::store::Reader reader(db);
  const auto run = reader.runs().front();
  EXPECT_EQ(run.status, ts::store::RunStatus::interrupted) << run.error;
  EXPECT_EQ(reader.iterations(run.id).size(), 1u);
  bool has_summary = false;  // the final write happened: the summaries are there
  for (const auto& m : reader.metrics(run.id)) has_summary |= m.name == "timed_iterations";
  EXPECT_TRUE(has_summary);
}

using ts::testing::WriteLock;

TEST(LockContention, ALockedDbSpillsTheRunToASideFileThatImportMerges) {
  TempDir dir;
  const fs::path db = dir / "runs.db";
  Child child({"run", "transformer", "--iters", "40", "--warmup", "0", "--threads", "1", "--eval-batches", "0",
               "--flush-interval", "0.05", "--lock-wait", "3", "--db", db.string()},
              dir / "log");
  ASSERT_TRUE(wait_for_rows(db, "SELECT count(*) FROM iterations", 1, 60s)) << read_file(dir / "log");
  int code = -1;
  {
    WriteLock lock(db);  // held through the rest of the run and its final write
    ASSERT_TRUE(lock.ok());
    code = child.wait(120s);
  }
  const std::string log = read_file(dir / "log");
  EXPECT_EQ(code, 3) << log;
  EXPECT_NE(log.find("is locked by another process"), std::string::npos) << log;  // the wait said so
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("trainscope import '([^']+)' --db"))) << log;
  const fs::path spill = m[1].str();
  ASSERT_TRUE(fs::exists(spill)) << spill;
  {
    ts::store::Reader side(spill);
    ASSERT_EQ(side.runs().size(), 1u);
    EXPECT_EQ(side.runs().front().status, ts::store::RunStatus::completed);
    EXPECT_EQ(side.iterations(side.runs().front().id).size(), 40u);
  }
  const int64_t streamed = count_rows(db, "SELECT count(*) FROM iterations");
  EXPECT_LT(streamed, 40);  // the lock stopped the flushes: the db has only part of it

  const auto imported = run_trainscope("import " + spill.string() + " --db " + db.string());
  EXPECT_EQ(imported.exit_code, 0) << imported.out;
  EXPECT_NE(imported.out.find("replacing its streamed part"), std::string::npos) << imported.out;
  ts::store::Reader reader(db);
  ASSERT_EQ(reader.runs().size(), 1u);  // merged into the same run, not a second copy
  const auto run = reader.runs().front();
  EXPECT_EQ(run.status, ts::store::RunStatus::completed);
  EXPECT_EQ(reader.iterations(run.id).size(), 40u);
  EXPECT_GT(reader.event_count(run.id), 0);
  EXPECT_EQ(integrity(db), "ok");
}

// A db removed (rm results/trainscope.db*) or replaced by another file while a run writes it
// (issue 39): its flushes went to a file no one can open, so the final write does not follow
// them there; it spills the whole run to a side file and exits 3.
TEST(LockContention, ADbRemovedOrReplacedDuringTheRunSpillsItsResults) {
  for (const bool replace : {false, true}) {
    SCOPED_TRACE(replace ? "replaced" : "removed");
    TempDir dir;
    const fs::path db = dir / "runs.db";
    // Long enough (about a second) that the file is gone before the run ends, on a fast machine too.
    Child child({"run", "transformer", "--iters", "300", "--warmup", "0", "--threads", "1", "--eval-batches", "0",
                 "--flush-interval", "0.05", "--db", db.string()},
                dir / "log");
    ASSERT_TRUE(wait_for_rows(db, "SELECT count(*) FROM iterations", 1, 60s)) << read_file(dir / "log");
    if (replace) {  // another db moved into its place
      const fs::path other = dir / "other.db";
      ts::store::Writer(other).begin_run(ts::store::RunInfo{});
      fs::rename(other, db);
    } else {
      for (const char* side : {"", "-wal", "-shm"}) fs::remove(db.string() + side);
    }
    const int code = child.wait(120s);
    const std::string log = read_file(dir / "log");
    EXPECT_EQ(code, 3) << log;
    EXPECT_NE(log.find(replace ? "was replaced by another file" : "was removed while this run was written"),
              std::string::npos)
        << log;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(log, m, std::regex("trainscope import '([^']+)' --db"))) << log;
    ts::store::Reader side(m[1].str());
    ASSERT_EQ(side.runs().size(), 1u);
    EXPECT_EQ(side.runs().front().status, ts::store::RunStatus::completed);
    EXPECT_EQ(side.iterations(side.runs().front().id).size(), 300u);
  }
}

// A db damaged between runs (bytes overwritten in its middle) is refused before anything is
// written into it (exit 2, the file untouched), not written into and refused later (issue 39).
TEST(LockContention, ADamagedDbIsRefusedBeforeARunWritesIntoIt) {
  TempDir dir;
  const fs::path db = dir / "runs.db";
  ASSERT_EQ(
      run_trainscope("run resnet50 --iters 2 --warmup 0 --threads 1 --eval-batches 0 --db " + db.string()).exit_code,
      0);
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_exec(h, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  const auto size = fs::file_size(db);
  ASSERT_GT(size, 64u * 4096);
  {  // garbage over a page in the middle, as a bad disk or a stray write would leave
    std::FILE* f = std::fopen(db.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, static_cast<long>((size / 4096 / 2) * 4096), SEEK_SET);
    const std::string junk(4096, '\xA5');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  ASSERT_NE(integrity(db), "ok");
  const std::string before = read_file(db);
  const auto res = run_trainscope("run resnet50 --iters 2 --warmup 0 --threads 1 --eval-batches 0 --db " + db.string());
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_NE(res.out.find("fails SQLite's quick_check"), std::string::npos) << res.out;
  EXPECT_EQ(read_file(db), before) << "nothing was written into it";
}

// `import` by the run's identity (issue 39): an older copy of a db (the run's partial snapshot
// while it ran) is not imported over the finished run, exit 0 with what it kept and why; the
// finished run replaces a partial copy; the same db imported twice adds nothing.
TEST(LockContention, ImportNeverReplacesARunWithAnOlderCopyOfIt) {
  TempDir dir;
  const fs::path db = dir / "runs.db", old = dir / "old.db", other = dir / "other.db";
  ASSERT_EQ(
      run_trainscope("run transformer --iters 6 --warmup 0 --threads 1 --eval-batches 0 --db " + db.string()).exit_code,
      0);
  fs::copy_file(db, old);  // with its -wal: the run as it was, then cut back to a snapshot
  if (fs::exists(db.string() + "-wal")) fs::copy_file(db.string() + "-wal", old.string() + "-wal");
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(old.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h,
                           "UPDATE runs SET status = 'running', ended_at = ''; DELETE FROM iterations WHERE idx >= 2; "
                           "DELETE FROM metrics",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(h);
  }
  auto res = run_trainscope("import " + old.string() + " --db " + db.string());
  EXPECT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("not imported (kept the db's more complete copy (completed, 6 iterations"), std::string::npos)
      << res.out;
  {
    ts::store::Reader r(db);
    ASSERT_EQ(r.runs().size(), 1u);
    EXPECT_EQ(r.runs()[0].status, ts::store::RunStatus::completed);
    EXPECT_EQ(r.iterations(r.runs()[0].id).size(), 6u);
  }
  res = run_trainscope("import " + db.string() + " --db " + old.string());
  EXPECT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("replacing its streamed part"), std::string::npos) << res.out;
  EXPECT_EQ(ts::store::Reader(old).runs().at(0).status, ts::store::RunStatus::completed);
  res = run_trainscope("import " + db.string() + " --db " + other.string());
  ASSERT_EQ(res.exit_code, 0) << res.out;
  res = run_trainscope("import " + db.string() + " --db " + other.string());
  EXPECT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("not imported (already there)"), std::string::npos) << res.out;
  EXPECT_EQ(ts::store::Reader(other).runs().size(), 1u);
}

// The trap: a POSIX lock belongs to the process, and closing ANY descriptor of the file drops
// them all. Opening a Reader (which checks the file's header) while a Writer of this process
// is open must not drop the Writer's locks: another process's close would then take the db for
// unused, checkpoint it and delete the -wal under us, and what we commit after it is lost.
TEST(StoreOpenFiles, ASecondConnectionInTheProcessKeepsTheFirstOnesLocks) {
  TempDir dir;
  const fs::path db = dir / "runs.db", empty = dir / "empty.db";
  ts::store::Writer w(db);
  ts::store::RunInfo info;
  info.workload = "resnet50";
  const int64_t run = w.begin_run(info);
  {
    ts::store::Reader r(db);
    EXPECT_EQ(r.runs().size(), 1u);
  }
  ts::store::Writer::check_target(db);
  { ts::store::Writer e(empty); }
  // Another process (a fresh one: a fork would share this one's SQLite state) opens the db for
  // writing and closes it: it must see that we still have it open.
  const auto other = run_trainscope("import " + empty.string() + " --db " + db.string());
  EXPECT_EQ(other.exit_code, 0) << other.out;
  EXPECT_TRUE(fs::exists(fs::path(db.string() + "-wal"))) << "the -wal was deleted under an open connection";
  w.finish_run(run, ts::store::RunStatus::completed, "", "");
  EXPECT_EQ(ts::store::Reader(db).run(run)->status, ts::store::RunStatus::completed);  // still seen
}

}  // namespace
