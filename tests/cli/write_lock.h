#pragma once
// Another process's hold on a db, for the tests of locked dbs: this process holds the db's write
// lock (BEGIN IMMEDIATE) from construction until destroyed.
#include <sqlite3.h>

#include <filesystem>

namespace ts::testing {

class WriteLock {
 public:
  explicit WriteLock(const std::filesystem::path& db) {
    sqlite3_open_v2(db.c_str(), &h_, SQLITE_OPEN_READWRITE, nullptr);
    sqlite3_busy_timeout(h_, 10000);
    ok_ = sqlite3_exec(h_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~WriteLock() {
    sqlite3_exec(h_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(h_);
  }
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;
  bool ok() const { return ok_; }

 private:
  sqlite3* h_ = nullptr;
  bool ok_ = false;
};

}  // namespace ts::testing
