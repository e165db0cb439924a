// How the store treats the paths it is given: names are plain file names (never SQLite URIs),
// committed pages in a -wal are seen, read-only directories can be read, and names too long for
// SQLite's files are refused before anything is created.
#include <grp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "store/reader.h"
#include "store/writer.h"
#include "tests/store/error_kind.h"

#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::store;
using Kind = StoreError::Kind;

namespace {

// A fresh directory per test (tests/support/files.h).
class TempDir : public ts::testing::ScratchDir {
 public:
  TempDir() : ScratchDir("ts_store_paths") {}
};
using ts::testing::entries;
using ts::testing::read_bytes;
using ts::testing::write_bytes;

using ts::testing::error_kind;

// Raw SQLite, outside the code under test. Absolute paths only: SQLite here takes "file:..."
// names as URIs.
class RawDb {
 public:
  explicit RawDb(const std::string& name, int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {
    rc_ = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  }
  ~RawDb() { sqlite3_close(db_); }
  int exec(const std::string& sql) { return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr); }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    std::string v;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return v;
  }
  int open_rc() const { return rc_; }

 private:
  sqlite3* db_ = nullptr;
  int rc_ = SQLITE_OK;
};

void make_foreign(const fs::path& absolute) {
  ASSERT_TRUE(absolute.is_absolute());
  RawDb raw(absolute.string());
  ASSERT_EQ(
      raw.exec("CREATE TABLE recipes (id INTEGER PRIMARY KEY, title TEXT); INSERT INTO recipes VALUES (1, 'soup')"),
      SQLITE_OK);
}

RunInfo sample_run(const std::string& workload = "mlp") {
  RunInfo info;
  info.workload = workload;
  info.preset = "tiny";
  info.device = "cpu";
  info.started_at = "2026-11-22T04:30:00Z";
  return info;
}

class WorkingDirectory {
 public:
  explicit WorkingDirectory(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~WorkingDirectory() { fs::current_path(old_); }

 private:
  fs::path old_;
};

constexpr int kCannotDropRoot = 77;

// Runs `check` in a child process that directory permissions apply to: as root it first becomes
// nobody (root writes into a 0555 directory). Returns the child's exit status.
int in_child_without_root(const std::function<int()>& check) {
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
      ::_exit(kCannotDropRoot);
    int code = 1;
    try {
      code = check();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 2;
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

// Debian's SQLite takes "file:..." names as URIs even without SQLITE_OPEN_URI. The store must
// not: "file:other.db" is a file of that name, not other.db; "?mode=memory" is part of a name.
TEST(StorePaths, UriLookingNamesArePlainFileNames) {
  TempDir dir;
  WorkingDirectory cwd(dir.path());

  make_foreign(dir / "file:foreign.db");
  const std::string foreign_bytes = read_bytes(dir / "file:foreign.db");
  EXPECT_EQ(error_kind([&] { Writer::check_target("file:foreign.db"); }), Kind::not_trainscope);
  EXPECT_EQ(error_kind([&] { Writer w("file:foreign.db"); }), Kind::not_trainscope);
  EXPECT_EQ(error_kind([&] { Reader r("file:foreign.db"); }), Kind::not_trainscope);
  EXPECT_EQ(read_bytes(dir / "file:foreign.db"), foreign_bytes);

  // As a URI, "file:other.db" names other.db: a foreign file that must not be switched to WAL.
  make_foreign(dir / "other.db");
  const std::string other_bytes = read_bytes(dir / "other.db");
  EXPECT_NO_THROW(Writer::check_target("file:other.db"));
  {
    Writer w("file:other.db");
    w.begin_run(sample_run());
  }
  EXPECT_EQ(read_bytes(dir / "other.db"), other_bytes);
  EXPECT_EQ(RawDb((dir / "other.db").string(), SQLITE_OPEN_READONLY).text("PRAGMA journal_mode"), "delete");
  EXPECT_EQ(RawDb((dir / "file:foreign.db").string(), SQLITE_OPEN_READONLY).text("PRAGMA journal_mode"), "delete");
  ASSERT_TRUE(fs::is_regular_file(dir / "file:other.db"));
  EXPECT_EQ(Reader("file:other.db").runs().size(), 1U);

  // Query parameters would make an in-memory or read-only db and lose the run.
  for (const std::string name : {"file:mem.db?mode=memory", "file:ro.db?mode=ro", "file::memory:"}) {
    EXPECT_NO_THROW(Writer::check_target(name)) << name;
    {
      Writer w(name);
      w.begin_run(sample_run(name));
    }
    ASSERT_TRUE(fs::is_regular_file(dir / name)) << name;
    EXPECT_NO_THROW(Writer::check_target(name)) << name;  // now existing: read through an encoded URI
    const auto runs = Reader(name).runs();
    ASSERT_EQ(runs.size(), 1U) << name;
    EXPECT_EQ(runs[0].workload, name);
  }

  // Characters a URI gives meaning to, in an existing db's name: file_uri must encode each.
  const std::string odd = "100% ?#&=;+\xc3\xa9 file:x%2F.db";
  {
    Writer w(odd);
    w.begin_run(sample_run("odd"));
  }
  EXPECT_NO_THROW(Writer::check_target(odd));
  EXPECT_EQ(Reader(odd).runs().size(), 1U);

  // Nothing else appeared: no -wal or -shm of the foreign files, no file named after a URI's
  // path (a reader, the last to close, may leave our dbs' -wal and -shm).
  const std::set<std::string> ours = {"file:other.db", "file:mem.db?mode=memory", "file:ro.db?mode=ro",
                                      "file::memory:", odd};
  for (const auto& entry : entries(dir.path())) {
    const bool ours_or_its_sidecar = ours.contains(entry) || ((entry.ends_with("-wal") || entry.ends_with("-shm")) &&
                                                              ours.contains(entry.substr(0, entry.size() - 4)));
    EXPECT_TRUE(ours_or_its_sidecar || entry == "file:foreign.db" || entry == "other.db") << entry;
  }
}

// After a crash or a checkpoint cut short (a full disk), committed pages live only in the -wal.
// immutable=1 ignores the -wal, so check_target must read it the normal way then.
TEST(StorePaths, CommittedPagesInTheWalAreSeen) {
  TempDir dir;
  const fs::path src = dir / "src.db";
  const std::vector<EventRow> events = {{1, 2, "conv", "layer1", "op", "forward", 0, 1},
                                        {3, 4, "relu", "layer1", "op", "forward", 0, 1}};
  // A writer killed with its connection open: everything it wrote is in src.db-wal.
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    try {
      Writer w(src);
      w.add_events(w.begin_run(sample_run()), events);
      ::_exit(0);  // no destructor: nothing is checkpointed
    } catch (...) {
      ::_exit(1);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_GT(fs::file_size(dir / "src.db-wal"), 0U);

  // A checkpoint stopped after two pages: the db file holds the first pages of the new state,
  // the -wal still all of it.
  fs::copy_file(src, dir / "full.db");
  fs::copy_file(dir / "src.db-wal", dir / "full.db-wal");
  int page_size = 0;
  {
    RawDb full((dir / "full.db").string());
    ASSERT_EQ(full.exec("PRAGMA wal_checkpoint(TRUNCATE)"), SQLITE_OK);
    page_size = std::stoi(full.text("PRAGMA page_size"));
  }
  const fs::path torn = dir / "torn.db";
  write_bytes(torn, read_bytes(dir / "full.db").substr(0, 2 * static_cast<size_t>(page_size)));
  fs::copy_file(dir / "src.db-wal", dir / "torn.db-wal");
  {
    // Without its -wal the file is torn, which is what makes this test mean something.
    RawDb immutable("file://" + torn.string() + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    ASSERT_NE(immutable.exec("SELECT count(*) FROM sqlite_master"), SQLITE_OK);
  }

  EXPECT_NO_THROW(Writer::check_target(torn));
  {
    Reader r(torn);
    ASSERT_EQ(r.runs().size(), 1U);
    EXPECT_EQ(r.event_count(r.runs()[0].id), 2);
  }
  {
    Writer w(torn);
    w.begin_run(sample_run("second"));
  }
  EXPECT_EQ(Reader(torn).runs().size(), 2U);
}

// runs, show and export read a db on read-only media or in a directory the user cannot write:
// WAL's -shm cannot be created there, so a db without a pending -wal is read as immutable.
TEST(StorePaths, ReaderReadsADatabaseInADirectoryItCannotWrite) {
  TempDir dir;
  const fs::path ro = dir / "ro";
  fs::create_directories(ro);
  {
    Writer w(ro / "runs.db");
    w.begin_run(sample_run());
  }
  ASSERT_EQ(entries(ro), std::set<std::string>{"runs.db"});
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                          fs::perms::others_read | fs::perms::others_exec);
  const int status = in_child_without_root([&] {
    Reader r(ro / "runs.db");
    const auto runs = r.runs();
    return runs.size() == 1 && runs[0].workload == "mlp" ? 0 : 1;
  });
  if (status == kCannotDropRoot) GTEST_SKIP() << "running as root and cannot become nobody: root writes any directory";
  EXPECT_EQ(status, 0);
  EXPECT_EQ(entries(ro), std::set<std::string>{"runs.db"});
}

// With committed pages in its -wal the db cannot be read without a -shm: the error says what to do.
TEST(StorePaths, PendingWalInADirectoryItCannotWriteGetsAClearError) {
  TempDir dir;
  const fs::path ro = dir / "ro";
  fs::create_directories(ro);
  {
    Writer w(dir / "live.db");
    w.begin_run(sample_run());
    fs::copy_file(dir / "live.db", ro / "runs.db");  // while open: the run is in the -wal
    fs::copy_file(dir / "live.db-wal", ro / "runs.db-wal");
  }
  ASSERT_GT(fs::file_size(ro / "runs.db-wal"), 0U);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read | fs::perms::others_exec);
  const int status = in_child_without_root([&] {
    try {
      Reader r(ro / "runs.db");
      std::fprintf(stderr, "child: read %zu runs without -shm\n", r.runs().size());
      return 1;
    } catch (const StoreError& e) {
      const std::string msg = e.what();
      if (msg.find("runs.db-shm") != std::string::npos && msg.find("Copy") != std::string::npos) return 0;
      std::fprintf(stderr, "child: unclear message: %s\n", e.what());
      return 3;
    }
  });
  if (status == kCannotDropRoot) GTEST_SKIP() << "running as root and cannot become nobody: root writes any directory";
  EXPECT_EQ(status, 0);
  EXPECT_EQ(entries(ro), (std::set<std::string>{"runs.db", "runs.db-wal"}));
  // The advice works: the files copied together to a writable place read fine.
  fs::copy_file(ro / "runs.db", dir / "copy.db");
  fs::copy_file(ro / "runs.db-wal", dir / "copy.db-wal");
  EXPECT_EQ(Reader(dir / "copy.db").runs().size(), 1U);
}

// SQLite keeps "-journal" (8 bytes) beside a db under its name: a name over 247 bytes creates the
// db, then fails. check_target refuses it, and any name or path the system or SQLite cannot take.
TEST(StorePaths, NamesTooLongForSqlitesFilesAreRefusedUpFront) {
  TempDir dir;
  for (const size_t n : {size_t{255}, size_t{248}}) {
    EXPECT_EQ(error_kind([&] { Writer::check_target(dir / std::string(n, 'x')); }), Kind::io) << n;
  }
  EXPECT_EQ(error_kind([&] { Writer::check_target(dir / std::string(256, 'd') / "runs.db"); }), Kind::io);
  // SQLite's Unix VFS takes paths of under 512 bytes.
  const fs::path deep = dir / std::string(170, 'a') / std::string(170, 'b') / std::string(170, 'c') / "runs.db";
  EXPECT_EQ(error_kind([&] { Writer::check_target(deep); }), Kind::io);
  fs::path very_deep = dir.path();
  while (very_deep.native().size() < PATH_MAX) very_deep /= std::string(200, 'p');
  EXPECT_EQ(error_kind([&] { Writer::check_target(very_deep / "runs.db"); }), Kind::io);
  EXPECT_TRUE(fs::is_empty(dir.path()));

  const fs::path longest = dir / std::string(247, 'x');
  EXPECT_NO_THROW(Writer::check_target(longest));
  {
    Writer w(longest);
    w.begin_run(sample_run());
  }
  EXPECT_EQ(Reader(longest).runs().size(), 1U);
}

// A Writer that creates a file and fails before the schema is in removes what it created.
TEST(StorePaths, FailedCreateLeavesNothingBehind) {
  TempDir dir;
  const std::string name(250, 'y');  // the db fits, its -journal does not
  EXPECT_EQ(error_kind([&] { Writer w(dir / name); }), Kind::io);
  EXPECT_EQ(error_kind([&] { Writer w(dir / "new/sub" / name); }), Kind::io);
  EXPECT_TRUE(fs::is_empty(dir.path())) << "left behind: " << testing::PrintToString(entries(dir.path()));

  // A file that was there before is not the Writer's to remove, even an empty one.
  write_bytes(dir / name, "");
  EXPECT_EQ(error_kind([&] { Writer w(dir / name); }), Kind::io);
  EXPECT_TRUE(fs::exists(dir / name));
}

// A database named like SQLite's own side files would open them as a database (issue 39: --db
// x.db-wal was accepted and made x.db-wal-wal beside it): refused before anything exists.
TEST(StorePaths, NamesOfSqlitesSideFilesAreRefused) {
  TempDir dir;
  for (const char* name : {"runs.db-wal", "runs.db-shm", "runs.db-journal", "x-wal"}) {
    const auto path = dir / name;
    EXPECT_EQ(error_kind([&] { Writer::check_target(path); }), Kind::io) << name;
    EXPECT_FALSE(std::filesystem::exists(path)) << name;
  }
  EXPECT_NO_THROW(Writer::check_target(dir / "runs.db"));
  EXPECT_NO_THROW(Writer::check_target(dir / "wal.db"));
}
