// OutputFile: the one way a command writes an output file. Harmful targets are refused before
// anything is written; a write is all or nothing and leaves no temporary behind.
#include "reports/output_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "reports/chrome_trace.h"
#include "store/reader.h"
#include "store/writer.h"

#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts;
using reports::OutputFile;
using reports::OutputRefused;

namespace {

// A fresh directory per test (tests/support/files.h).
class TempDir : public ts::testing::ScratchDir {
 public:
  TempDir() : ScratchDir("trainscope_output") {}
};
using ts::testing::entries;
using ts::testing::read_bytes;
using ts::testing::write_bytes;

// These tests are of other properties than whose a file is: any existing file may be replaced.
void write_text(const fs::path& out, const std::string& text, const fs::path& db = {}) {
  reports::write_output_file(out, db, reports::Replace::anything, [&](OutputFile& f) { f.write(text); });
}

// Restores the working directory (tests of relative names change it).
class WorkingDirectory {
 public:
  explicit WorkingDirectory(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~WorkingDirectory() { fs::current_path(old_); }

 private:
  fs::path old_;
};

}  // namespace

TEST(OutputFile, WritesNewFilesAndReplacesOldOnesWholly) {
  TempDir dir;
  const fs::path out = dir / "trace.json";
  write_text(out, "first");
  EXPECT_EQ(read_bytes(out), "first");
  write_text(out, std::string(3 << 20, 'x'));  // several buffers' worth
  EXPECT_EQ(read_bytes(out), std::string(3 << 20, 'x'));
  EXPECT_EQ(entries(dir.path()), std::set<std::string>{"trace.json"}) << "a temporary was left behind";
}

TEST(OutputFile, ReplacedFileKeepsItsPermissions) {
  TempDir dir;
  const fs::path out = dir / "private.json";
  write_bytes(out, "old");
  fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write);
  write_text(out, "new");
  EXPECT_EQ(read_bytes(out), "new");
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

TEST(OutputFile, ThrowingProducerLeavesTargetAndNoTemporary) {
  TempDir dir;
  const fs::path out = dir / "trace.json";
  write_bytes(out, "the old trace");
  const auto before = entries(dir.path());
  EXPECT_THROW(reports::write_output_file(out, {}, reports::Replace::anything,
                                          [](OutputFile& f) {
                                            f.write(std::string(2 << 20, 'y'));  // some of it reached the disk
                                            throw std::runtime_error("the producer failed");
                                          }),
               std::runtime_error);
  EXPECT_EQ(read_bytes(out), "the old trace");
  EXPECT_EQ(entries(dir.path()), before);
  {
    OutputFile abandoned(dir / "never.json");
    abandoned.write("no commit");
  }
  EXPECT_EQ(entries(dir.path()), before);
}

// A write error (here the file size limit; a full disk alike) throws, the target stays.
TEST(OutputFile, WriteErrorLeavesTargetAndNoTemporary) {
  TempDir dir;
  const fs::path out = dir / "trace.json";
  write_bytes(out, "the old trace");
  const auto before = entries(dir.path());
  const pid_t child = ::fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing the process
    const rlimit limit{64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write_text(out, std::string(4 << 20, 'z'));
    } catch (const OutputRefused&) {
      ::_exit(3);
    } catch (const std::runtime_error&) {
      ::_exit(0);
    }
    ::_exit(2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the write error must throw std::runtime_error (not a refusal)";
  EXPECT_EQ(read_bytes(out), "the old trace");
  EXPECT_EQ(entries(dir.path()), before);
}

TEST(OutputFile, RefusesTheDatabaseItReadsUnderAnyName) {
  TempDir dir;
  const fs::path db = dir / "runs.db";
  store::Writer writer(db);  // kept open: -wal and -shm exist
  writer.begin_run(store::RunInfo{});
  ASSERT_TRUE(fs::exists(dir / "runs.db-wal"));
  ASSERT_TRUE(fs::exists(dir / "runs.db-shm"));
  fs::create_directories(dir / "sub");
  fs::create_symlink(db, dir / "link.db");
  fs::create_hard_link(db, dir / "hard.db");
  fs::create_hard_link(dir / "runs.db-wal", dir / "hard-wal");
  const std::string db_bytes = read_bytes(db), wal_bytes = read_bytes(dir / "runs.db-wal");
  const auto before = entries(dir.path());
  const std::vector<fs::path> targets = {db,
                                         dir.path() / "." / "runs.db",
                                         dir / "sub/../runs.db",
                                         dir / "link.db",
                                         dir / "hard.db",
                                         dir / "runs.db-wal",
                                         dir / "runs.db-shm",
                                         dir / "runs.db-journal",  // missing: caught by its path
                                         dir / "hard-wal"};
  for (const auto& target : targets) {
    EXPECT_THROW(write_text(target, "{}", db), OutputRefused) << target;
    EXPECT_THROW(reports::check_output_path(target, db), OutputRefused) << target;
  }
  // The db named through a link is protected too, with the files SQLite keeps beside its target.
  EXPECT_THROW(write_text(db, "{}", dir / "link.db"), OutputRefused);
  EXPECT_THROW(write_text(dir / "runs.db-wal", "{}", dir / "link.db"), OutputRefused);
  {
    WorkingDirectory cwd(dir.path());
    EXPECT_THROW(write_text("runs.db", "{}", "./runs.db"), OutputRefused);
    EXPECT_THROW(write_text("./runs.db-shm", "{}", "runs.db"), OutputRefused);
  }
  EXPECT_EQ(read_bytes(db), db_bytes);
  EXPECT_EQ(read_bytes(dir / "runs.db-wal"), wal_bytes);
  EXPECT_EQ(entries(dir.path()), before);
  EXPECT_TRUE(fs::is_symlink(dir / "link.db"));
  EXPECT_EQ(store::Reader(db).runs().size(), 1U);
  EXPECT_NO_THROW(write_text(dir / "trace.json", "{}", db)) << "a file beside the db is fine";
}

TEST(OutputFile, RefusesDirectoriesDevicesAndPlacesItCannotWrite) {
  TempDir dir;
  fs::create_directories(dir / "adir");
  write_bytes(dir / "plain", "x");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  const std::vector<fs::path> targets = {
      "",           dir / "adir",    dir / "adir/", dir / "missing/out.json", dir / "plain/out.json",
      dir / "fifo", dir / "dangling"};
  fs::create_symlink(dir / "nowhere/x", dir / "dangling");
  for (const auto& target : targets) {
    EXPECT_THROW(write_text(target, "{}"), OutputRefused) << target;
  }
  EXPECT_EQ(fs::status(dir / "fifo").type(), fs::file_type::fifo);
  EXPECT_EQ(read_bytes(dir / "plain"), "x");
  EXPECT_FALSE(fs::exists(dir / "missing"));
  EXPECT_TRUE(fs::is_empty(dir / "adir"));

  // A device: as root a node of our own where allowed (the refusal must not depend on /dev
  // being unwritable); /dev/null otherwise, checked to be a device still.
  fs::path device = dir / "null";
  if (::geteuid() != 0 || ::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) device = "/dev/null";
  EXPECT_THROW(write_text(device, "{}"), OutputRefused);
  EXPECT_EQ(fs::status(device).type(), fs::file_type::character);

  if (::geteuid() != 0) {  // root writes into a 0555 directory anyway
    fs::create_directories(dir / "locked");
    fs::permissions(dir / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(write_text(dir / "locked/out.json", "{}"), OutputRefused);
    EXPECT_TRUE(fs::is_empty(dir / "locked"));
  }
}

TEST(OutputFile, RefusesNamesTheSystemCannotTake) {
  TempDir dir;
  EXPECT_THROW(write_text(dir / std::string(NAME_MAX + 1, 'n'), "{}"), OutputRefused);
  EXPECT_THROW(write_text(dir / std::string(NAME_MAX + 1, 'd') / "x.json", "{}"), OutputRefused);
  fs::path deep = dir.path();
  while (deep.native().size() < PATH_MAX) deep /= std::string(200, 'p');
  EXPECT_THROW(write_text(deep / "x.json", "{}"), OutputRefused);
  EXPECT_TRUE(fs::is_empty(dir.path()));
  // The longest name still works: the temporary's name is cut to fit beside it.
  const fs::path longest = dir / std::string(NAME_MAX, 'l');
  write_text(longest, "fits");
  EXPECT_EQ(read_bytes(longest), "fits");
  EXPECT_EQ(entries(dir.path()).size(), 1U);
}

TEST(OutputFile, SymbolicLinkIsWrittenThrough) {
  TempDir dir;
  fs::create_directories(dir / "real");
  write_bytes(dir / "real/trace.json", "old");
  fs::create_symlink(dir / "real/trace.json", dir / "latest.json");
  write_text(dir / "latest.json", "new");
  EXPECT_TRUE(fs::is_symlink(dir / "latest.json")) << "the link itself must stay";
  EXPECT_EQ(read_bytes(dir / "real/trace.json"), "new");
  EXPECT_EQ(entries(dir / "real"), std::set<std::string>{"trace.json"});
}

// The export's own path: onto its db it refuses before reading, and the db keeps every run.
TEST(OutputFile, ChromeTraceRefusesItsOwnDatabase) {
  TempDir dir;
  const fs::path db = dir / "runs.db";
  {
    store::Writer w(db);
    const int64_t run = w.begin_run(store::RunInfo{});
    w.finish_run(run, store::RunStatus::completed, "2026-01-01T00:00:00Z", "");
  }
  const std::string before = read_bytes(db);
  EXPECT_THROW(reports::write_chrome_trace(db, 1, db), OutputRefused);
  EXPECT_THROW(reports::write_chrome_trace(db, 1, dir.path() / "." / "runs.db"), OutputRefused);
  EXPECT_EQ(read_bytes(db), before);
  EXPECT_EQ(store::Reader(db).runs().size(), 1U);
  // A missing run fails after the check: the old trace (one trainscope wrote, so that the check
  // passes) stays, no temporary is left.
  const std::string old_trace = R"({"otherData":{"producer":"trainscope"}})";
  write_bytes(dir / "trace.json", old_trace);
  const auto files = entries(dir.path());
  EXPECT_THROW(reports::write_chrome_trace(db, 7, dir / "trace.json"), store::StoreError);
  EXPECT_EQ(read_bytes(dir / "trace.json"), old_trace);
  EXPECT_EQ(entries(dir.path()), files);
}

// Whose a file is (issue 39): an existing file that trainscope did not write, or a SQLite file,
// is replaced only with Replace::anything (--force); one it wrote (its name in the first or last
// 4 KiB: a trace's producer, a report's title, a JSON's producer key) is replaced as before.
TEST(OutputFile, ReplacesOnlyWhatTrainscopeWroteUnlessForced) {
  TempDir dir;
  const auto write_own = [](const fs::path& out, const std::string& text) {
    reports::write_output_file(out, {}, reports::Replace::ours_only, [&](OutputFile& f) { f.write(text); });
  };
  const fs::path notes = dir / "notes.txt";
  write_bytes(notes, "my notes, not a trace");
  EXPECT_THROW(write_own(notes, "# trainscope report"), OutputRefused);
  EXPECT_EQ(read_bytes(notes), "my notes, not a trace");
  try {
    reports::check_output_path(notes);
  } catch (const OutputRefused& e) {
    EXPECT_NE(std::string(e.what()).find("not a file trainscope wrote; --force replaces it"), std::string::npos)
        << e.what();
  }
  const fs::path db = dir / "other.db";
  write_bytes(db, std::string("SQLite format 3\0", 16) + std::string(100, '\0') + "trainscope");
  EXPECT_THROW(write_own(db, "# trainscope report"), OutputRefused);  // a db, whatever it holds
  // Ours: the name near the start, or near the end of a long file (a PNG's text chunk).
  const fs::path report = dir / "report.md";
  write_own(report, "# trainscope suite report\n");
  write_own(report, "# trainscope suite report, again\n");
  EXPECT_EQ(read_bytes(report), "# trainscope suite report, again\n");
  const fs::path strip = dir / "strip.png";
  write_bytes(strip, std::string(100000, 'p') + "Software trainscope");
  EXPECT_NO_THROW(write_own(strip, "new strip trainscope"));
  write_bytes(dir / "empty.json", "");
  EXPECT_NO_THROW(write_own(dir / "empty.json", "x"));  // nothing to lose
  // --force: anything regular.
  write_text(notes, "replaced on request");
  EXPECT_EQ(read_bytes(notes), "replaced on request");
  // A JSON document as written: the producer first, the rest as dump(2) gives it.
  const std::string j = reports::own_json_text(nlohmann::json{{"a", 1}, {"b", {1, 2}}});
  EXPECT_TRUE(j.starts_with("{\n  \"producer\": \"trainscope\",\n  \"a\": 1,")) << j;
  EXPECT_EQ(nlohmann::json::parse(j), (nlohmann::json{{"producer", "trainscope"}, {"a", 1}, {"b", {1, 2}}}));
  EXPECT_EQ(nlohmann::json::parse(reports::own_json_text(nlohmann::json::object())),
            (nlohmann::json{{"producer", "trainscope"}}));
}

// A symbolic link another user planted in a shared sticky directory (/tmp) is not followed, even
// with --force (issue 39: report and export followed one, resolved in user space where the
// kernel's protected_symlinks never looks). Needs root to make a link owned by another user.
TEST(OutputFile, RefusesALinkAnotherUserPlantedInASharedStickyDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (lchown to another user)";
  TempDir dir;
  const fs::path shared = dir / "shared";
  fs::create_directories(shared);
  ::chmod(shared.c_str(), 01777);
  const fs::path victim = dir / "victim.txt";
  write_bytes(victim, "precious");
  const fs::path link = shared / "report.html";
  fs::create_symlink(victim, link);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
  EXPECT_THROW(write_text(link, "trainscope overwrote you"), OutputRefused);
  EXPECT_EQ(read_bytes(victim), "precious");
  // The caller's own link there is followed, as before.
  ASSERT_EQ(::lchown(link.c_str(), 0, 0), 0);
  write_text(link, "trainscope wrote through my own link");
  EXPECT_EQ(read_bytes(victim), "trainscope wrote through my own link");
}
