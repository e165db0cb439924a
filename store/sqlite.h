#pragma once
// Internal: thin RAII layer over the SQLite C API. Not part of the public store API.
// Every sqlite3 return code goes through check() (via TS_SQLITE_CHECK), which throws StoreError.
#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "store/error.h"
#include "store/open_files.h"

namespace ts::store::detail {

// Who holds a lock SQLite takes on the database `file` ("pid 4242: sqlite3 runs.db"), from
// /proc/locks; "" when none is seen (another host's process on a network file system, or gone).
std::string lock_holder(const std::string& file);

// The one check for sqlite3 return codes: throws StoreError unless rc is SQLITE_OK / SQLITE_ROW /
// SQLITE_DONE. `context` (the SQL or the operation) is only evaluated on failure; the message carries
// it with sqlite's own message and code. Kind: NOTADB -> not_trainscope, CORRUPT -> corrupt, BUSY and
// LOCKED -> busy (the message names the file and who holds it), else io.
[[noreturn]] void throw_sqlite_error(int rc, sqlite3* db, std::string_view context);
#define TS_SQLITE_CHECK(rc_expr, db, context)                                 \
  do {                                                                        \
    const int ts_rc_ = (rc_expr);                                             \
    if (ts_rc_ != SQLITE_OK && ts_rc_ != SQLITE_ROW && ts_rc_ != SQLITE_DONE) \
      ::ts::store::detail::throw_sqlite_error(ts_rc_, (db), (context));       \
  } while (false)

class Db {
 public:
  Db() = default;
  // Opens the file at `path`, never a URI: SQLite here takes "file:..." names as URIs even without
  // SQLITE_OPEN_URI, so the path is made absolute first ("file:x.db" is then ./file:x.db).
  // flags: SQLITE_OPEN_*.
  Db(const std::filesystem::path& path, int flags);
  // Opens a "file:" URI this code built itself (percent-encoded; see file_uri in schema.cpp).
  static Db from_uri(const std::string& uri, int flags);
  sqlite3* get() const noexcept { return db_.get(); }
  // How long a statement waits for another process's lock before failing with SQLITE_BUSY
  // (default 5 s). With `report`, a wait past 2 s prints a line on stderr every 5 s, naming
  // the file and how long is left, so a stalled command says why.
  void set_lock_wait(std::chrono::milliseconds limit, bool report);
  struct LockWait;                          // the busy handler's state; on the heap so its address survives moves
  void exec(std::string_view sql);          // one or more statements, no results
  int64_t query_int(std::string_view sql);  // first column of the first row (0 when no row)
  std::string query_text(std::string_view sql);
  int64_t changes() const noexcept { return sqlite3_changes64(db_.get()); }
  int64_t last_insert_id() const noexcept { return sqlite3_last_insert_rowid(db_.get()); }

 private:
  void open(const std::string& filename, int flags);
  struct Closer {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
  };
  struct LockWaitDeleter {
    void operator()(LockWait* w) const noexcept;
  };
  std::unique_ptr<LockWait, LockWaitDeleter> lock_wait_;  // declared first: outlives the connection
  OpenFile registered_;  // this process has the file open (store/open_files.h); outlives the connection
  std::unique_ptr<sqlite3, Closer> db_;
};

class Stmt {
 public:
  Stmt() = default;
  Stmt(const Db& db, std::string_view sql);

  // Resets and clears bindings on construction and resets again on destruction, so a statement is
  // always reusable (and never holds a read transaction open) even after an exception.
  class Use {
   public:
    explicit Use(Stmt& s) : s_(s) { s_.reset(); }
    ~Use() { sqlite3_reset(s_.stmt_.get()); }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    Stmt& s_;
  };

  Stmt& bind(int index, int64_t value);
  Stmt& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Stmt& bind(int index, bool value) { return bind(index, static_cast<int64_t>(value ? 1 : 0)); }
  Stmt& bind(int index, double value);
  Stmt& bind(int index, std::string_view value);
  bool step();  // true: a row is available; false: done
  void run() {
    while (step()) {
    }
  }
  void rearm() noexcept { sqlite3_reset(stmt_.get()); }  // for the next row; bindings are kept

  int64_t col_int(int index) const { return sqlite3_column_int64(stmt_.get(), index); }
  bool col_null(int index) const { return sqlite3_column_type(stmt_.get(), index) == SQLITE_NULL; }
  double col_double(int index) const { return sqlite3_column_double(stmt_.get(), index); }
  std::string col_text(int index) const;

 private:
  void reset();
  struct Finalizer {
    void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
  };
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
  sqlite3* db_ = nullptr;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() was called.
class Transaction {
 public:
  explicit Transaction(Db& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Db& db_;
  bool done_ = false;
};

}  // namespace ts::store::detail
