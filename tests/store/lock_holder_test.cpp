// A db held by another process is named with who holds it (issue 39: a raw "sqlite error 5
// (database is locked)" before): the pid and command line, read from /proc/locks.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "store/error.h"
#include "store/sqlite.h"
#include "store/writer.h"
#include "tests/support/files.h"

using namespace ts::store;

TEST(StoreLocks, ALockHeldElsewhereIsNamedWithItsHolder) {
  ts::testing::ScratchDir dir("ts_lock_holder");
  const auto db = dir / "runs.db";
  { Writer w(db); }  // a trainscope db, in WAL mode
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {  // another process: an exclusive transaction, held until killed
    sqlite3* h = nullptr;
    if (sqlite3_open(db.c_str(), &h) != SQLITE_OK || sqlite3_exec(h, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr))
      ::_exit(1);
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  const std::string expected = "pid " + std::to_string(holder);
  EXPECT_EQ(detail::lock_holder(db.string()).rfind(expected, 0), 0u) << detail::lock_holder(db.string());
  std::string message;
  try {
    Writer w(db, std::chrono::milliseconds(200));
    w.begin_run(RunInfo{});
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::busy);
    message = e.what();
  }
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  EXPECT_NE(message.find("is locked by another process (" + expected), std::string::npos) << message;
  EXPECT_EQ(detail::lock_holder(db.string()), "");  // gone with it
}
