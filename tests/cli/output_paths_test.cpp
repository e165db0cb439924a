// The command never destroys data through a path: export and play refuse outputs that would
// (the db itself under any name, its -wal/-shm, directories, devices), --db names are file names
// and never SQLite URIs, names too long for SQLite's files are refused before anything is
// created, and a db in a directory the user cannot write can still be read.
#include <grp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "store/reader.h"
#include "store/writer.h"

namespace fs = std::filesystem;
using namespace ts;
using namespace ts::testing;

namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// trainscope with `args`, run in `dir` (relative names are what SQLite would take as URIs).
CommandResult run_in(const fs::path& dir, const std::string& args) {
  return ts::testing::run_command("cd " + quote(dir.string()) + " && " + TRAINSCOPE_BIN + " " + args);
}

std::string quick_run(const std::string& db) {
  return "run resnet50 --preset tiny --iters 1 --warmup 0 --threads 1 --eval-batches 0 --no-trace --db " + quote(db);
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

std::string journal_mode(const fs::path& absolute) {
  sqlite3* db = nullptr;
  std::string mode;
  if (sqlite3_open_v2(absolute.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      mode = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return mode;
}

void make_foreign(const fs::path& absolute) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(absolute.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t (x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

constexpr int kCannotDropRoot = 77;

// trainscope with `args` as a user that directory permissions apply to: as root, nobody.
CommandResult run_unprivileged(const std::string& args) {
  const std::string command = std::string(TRAINSCOPE_BIN) + " " + args;
  int pipe_fds[2];
  CommandResult r;
  if (::pipe(pipe_fds) != 0) return r;
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
      ::_exit(kCannotDropRoot);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  std::array<char, 4096> buf{};
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf.data(), buf.size())) > 0) r.out.append(buf.data(), static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Makes a directory read-only (0555) for its lifetime.
class ReadOnlyDirectory {
 public:
  explicit ReadOnlyDirectory(const fs::path& dir) : dir_(dir) {
    fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  }
  ~ReadOnlyDirectory() {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
  }

 private:
  fs::path dir_;
};

}  // namespace

// export --chrome onto the db being read, under any of its names, or onto the files SQLite keeps
// beside it, a directory or a device: exit 2, and every run is still there, byte for byte.
TEST(CliOutputPaths, ExportNeverReplacesTheDatabase) {
  TempDir dir;
  ASSERT_EQ(run_in(dir.path(), quick_run("t.db")).exit_code, 0);
  const fs::path db = dir / "t.db";
  store::Writer holder(db);  // kept open: t.db-wal and t.db-shm exist
  ASSERT_TRUE(fs::exists(dir / "t.db-wal"));
  ASSERT_TRUE(fs::exists(dir / "t.db-shm"));
  fs::create_directories(dir / "adir");
  fs::create_symlink(db, dir / "link.db");
  fs::create_hard_link(db, dir / "hard.db");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  // A device: as root one of our own where allowed; /dev/null otherwise, checked below.
  std::string device = (dir / "null").string();
  if (::geteuid() != 0 || ::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) device = "/dev/null";
  const std::string db_bytes = read_file(db), wal_bytes = read_file(dir / "t.db-wal");
  const auto before = entries(dir.path());

  const std::vector<std::pair<std::string, std::string>> cases = {
      // --db, --chrome
      {"t.db", "t.db"},      {"t.db", "./t.db"},       {"./t.db", "t.db"},
      {"t.db", db.string()}, {"t.db", "adir/../t.db"}, {"t.db", "link.db"},
      {"link.db", "t.db"},   {"t.db", "hard.db"},      {"t.db", "t.db-wal"},
      {"t.db", "t.db-shm"},  {"t.db", "t.db-journal"}, {"link.db", "t.db-wal"},
      {"t.db", "adir"},      {"t.db", "adir/"},        {"t.db", "."},
      {"t.db", "fifo"},      {"t.db", device},         {"t.db", "missing/x.json"}};
  for (const auto& [read_db, out] : cases) {
    const auto res = run_in(dir.path(), "export 1 --db " + quote(read_db) + " --chrome " + quote(out));
    EXPECT_EQ(res.exit_code, 2) << "--db " << read_db << " --chrome " << out << "\n" << res.out;
    EXPECT_NE(res.out.find("cannot write"), std::string::npos) << res.out;
  }
  EXPECT_EQ(read_file(db), db_bytes);
  EXPECT_EQ(read_file(dir / "t.db-wal"), wal_bytes);
  EXPECT_EQ(entries(dir.path()), before) << "nothing may be created or left behind";
  EXPECT_TRUE(fs::is_symlink(dir / "link.db"));
  EXPECT_EQ(fs::status(dir / "fifo").type(), fs::file_type::fifo);
  EXPECT_EQ(fs::status(device).type(), fs::file_type::character) << device;
  const auto runs = run_in(dir.path(), "runs --db t.db");
  EXPECT_EQ(runs.exit_code, 0) << runs.out;
  EXPECT_NE(runs.out.find("resnet50"), std::string::npos) << runs.out;
}

// A failed export (a missing run) leaves the old file as it was and no temporary.
TEST(CliOutputPaths, FailedExportKeepsTheOldFile) {
  TempDir dir;
  ASSERT_EQ(run_in(dir.path(), quick_run("t.db")).exit_code, 0);
  std::ofstream(dir / "trace.json") << "the old trace";
  const auto before = entries(dir.path());
  const auto res = run_in(dir.path(), "export 7 --db t.db --chrome trace.json --force");
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_EQ(read_file(dir / "trace.json"), "the old trace");
  EXPECT_EQ(entries(dir.path()), before);
  // Not a file trainscope wrote: replaced only with --force (issue 39).
  const auto refused = run_in(dir.path(), "export 1 --db t.db --chrome trace.json");
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.out.find("not a file trainscope wrote; --force replaces it"), std::string::npos) << refused.out;
  EXPECT_EQ(read_file(dir / "trace.json"), "the old trace");
  const auto ok = run_in(dir.path(), "export 1 --db t.db --chrome trace.json --force");
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(read_file(dir / "trace.json").find("\"traceEvents\""), std::string::npos);
  EXPECT_EQ(entries(dir.path()), before) << "the trace replaced the old one; no temporary is left";
}

// play writes its PNG the same way: harmful --out paths are refused before the game is played.
TEST(CliOutputPaths, PlayRefusesHarmfulOutputs) {
  TempDir dir;
  fs::create_directories(dir / "adir");
  // A device (not a FIFO: a play that opened one would wait for a reader forever).
  std::string device = (dir / "null").string();
  if (::geteuid() != 0 || ::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) device = "/dev/null";
  const auto before = entries(dir.path());
  const std::vector<std::string> outs = {"adir", device, "missing/strip.png", std::string(NAME_MAX + 1, 'p') + ".png"};
  for (const std::string& out : outs) {
    const auto res = run_in(dir.path(), "play --preset tiny --steps 8 --out " + quote(out));
    EXPECT_EQ(res.exit_code, 2) << out << "\n" << res.out;
    EXPECT_NE(res.out.find("cannot write"), std::string::npos) << res.out;
  }
  EXPECT_EQ(entries(dir.path()), before);
  EXPECT_TRUE(fs::is_empty(dir / "adir"));
  EXPECT_EQ(fs::status(device).type(), fs::file_type::character) << device;

  std::ofstream(dir / "strip.png") << "old";
  EXPECT_EQ(run_in(dir.path(), "play --preset tiny --steps 8 --out strip.png").exit_code, 2);  // not ours
  const auto ok = run_in(dir.path(), "play --preset tiny --steps 8 --out strip.png --force");
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  // Its own strip (the PNG's Software text says whose) is replaced without --force.
  EXPECT_EQ(run_in(dir.path(), "play --preset tiny --steps 9 --out strip.png").exit_code, 0);
  EXPECT_EQ(read_file(dir / "strip.png").substr(0, 4), "\x89PNG");
  EXPECT_EQ(entries(dir.path()).size(), before.size() + 1) << "no temporary is left";
}

// --db names are file names, never SQLite URIs ("file:x.db" would otherwise open x.db).
TEST(CliOutputPaths, UriLookingDbNamesAreFileNames) {
  TempDir dir;
  make_foreign(dir / "file:foreign.db");
  const std::string foreign_bytes = read_file(dir / "file:foreign.db");
  auto res = run_in(dir.path(), quick_run("file:foreign.db"));
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_EQ(read_file(dir / "file:foreign.db"), foreign_bytes);
  EXPECT_EQ(journal_mode(dir / "file:foreign.db"), "delete");

  make_foreign(dir / "other.db");
  const std::string other_bytes = read_file(dir / "other.db");
  res = run_in(dir.path(), quick_run("file:other.db"));
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_EQ(read_file(dir / "other.db"), other_bytes);
  EXPECT_EQ(journal_mode(dir / "other.db"), "delete");
  for (const char* sidecar : {"file:foreign.db-wal", "file:foreign.db-shm", "other.db-wal", "other.db-shm"}) {
    EXPECT_FALSE(fs::exists(dir / sidecar)) << sidecar;
  }
  EXPECT_EQ(store::Reader(dir / "file:other.db").runs().size(), 1U);

  const std::string memory = "file:mem.db?mode=memory";
  res = run_in(dir.path(), quick_run(memory));
  ASSERT_EQ(res.exit_code, 0) << res.out;
  ASSERT_TRUE(fs::is_regular_file(dir / memory)) << "the run went into an in-memory db";
  res = run_in(dir.path(), "show 1 --db " + quote(memory));
  EXPECT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("resnet50"), std::string::npos) << res.out;
  EXPECT_FALSE(fs::exists(dir / "mem.db"));
}

// A db on read-only media or in a directory the user cannot write: runs, show and export (to a
// writable place) work, and nothing is created beside the db.
TEST(CliOutputPaths, ReadsADatabaseInADirectoryItCannotWrite) {
  TempDir dir;
  fs::create_directories(dir / "ro");
  fs::create_directories(dir / "out");
  fs::permissions(dir / "out", fs::perms::all);  // nobody writes the export here
  ASSERT_EQ(
      ts::testing::run_command(std::string(TRAINSCOPE_BIN) + " " + quick_run((dir / "ro/t.db").string())).exit_code, 0);
  { store::Writer last(dir / "ro/t.db"); }  // the last connection to close removes -wal and -shm
  ASSERT_EQ(entries(dir / "ro"), std::set<std::string>{"t.db"});
  ReadOnlyDirectory read_only(dir / "ro");
  const std::string db = quote((dir / "ro/t.db").string());

  auto res = run_unprivileged("runs --db " + db);
  if (res.exit_code == kCannotDropRoot)
    GTEST_SKIP() << "running as root and cannot become nobody: root writes any directory";
  if (res.exit_code == 126 || res.exit_code == 127)
    GTEST_SKIP() << "nobody cannot run " << TRAINSCOPE_BIN << ": " << res.out;
  EXPECT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("resnet50"), std::string::npos) << res.out;
  res = run_unprivileged("show 1 --db " + db);
  EXPECT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("resnet50/tiny"), std::string::npos) << res.out;
  res = run_unprivileged("export 1 --db " + db + " --chrome " + quote((dir / "out/trace.json").string()));
  EXPECT_EQ(res.exit_code, 0) << res.out;
  EXPECT_TRUE(fs::is_regular_file(dir / "out/trace.json"));
  res = run_unprivileged("export 1 --db " + db + " --chrome " + quote((dir / "ro/trace.json").string()));
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_EQ(entries(dir / "ro"), std::set<std::string>{"t.db"});
}

// SQLite keeps "<db>-journal" beside a db: a name over 247 bytes would create an empty db and
// fail. Such names, and output names over NAME_MAX, are refused with exit 2 and nothing created.
TEST(CliOutputPaths, LongNamesAreRefusedBeforeAnythingIsCreated) {
  TempDir dir;
  for (const size_t n : {size_t{255}, size_t{248}}) {
    const auto res = run_in(dir.path(), quick_run(std::string(n, 'x')));
    EXPECT_EQ(res.exit_code, 2) << n << "\n" << res.out;
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
  ASSERT_EQ(run_in(dir.path(), quick_run("t.db")).exit_code, 0);
  const auto before = entries(dir.path());
  const auto res = run_in(dir.path(), "export 1 --db t.db --chrome " + std::string(NAME_MAX + 1, 'j'));
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_EQ(entries(dir.path()), before);
}
