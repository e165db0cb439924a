#include "store/sqlite.h"

#include <fmt/format.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

namespace ts::store::detail {

std::string lock_holder(const std::string& file) {
  // SQLite's POSIX locks: in WAL mode on the -shm file (its write, checkpoint and read-mark
  // bytes, 120-135), else on the database's lock bytes from 2^30. Read from /proc/locks: opening
  // the file to ask (F_GETLK) and closing it would drop this process's own locks on it.
  struct Place {
    std::string path;
    long long first, last;
  };
  const Place places[] = {{file + "-shm", 120, 135}, {file, 0x40000000LL, 0x40000000LL + 511}};
  std::ifstream locks("/proc/locks");
  std::vector<std::string> lines;
  for (std::string line; std::getline(locks, line);) lines.push_back(line);
  for (const Place& place : places) {
    struct stat st {};
    if (::stat(place.path.c_str(), &st) != 0) continue;
    const std::string id = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev), st.st_ino);
    for (const std::string& line : lines) {
      // "1: POSIX  ADVISORY  WRITE 25778 fe:00:10953026 120 120" (an OFD lock's pid is -1)
      std::istringstream in(line);
      std::string number, kind, mode, access, dev_inode, end;
      long long pid = 0, start = 0;
      if (!(in >> number >> kind >> mode >> access >> pid >> dev_inode >> start >> end)) continue;
      const long long stop = end == "EOF" ? std::numeric_limits<long long>::max() : std::atoll(end.c_str());
      if (dev_inode != id || pid <= 0 || pid == ::getpid() || stop < place.first || start > place.last) continue;
      std::ifstream cmdline(fmt::format("/proc/{}/cmdline", pid));
      std::string command((std::istreambuf_iterator<char>(cmdline)), {});
      std::replace(command.begin(), command.end(), '\0', ' ');
      while (!command.empty() && command.back() == ' ') command.pop_back();
      if (command.size() > 80) command = command.substr(0, 77) + "...";
      return command.empty() ? fmt::format("pid {}", pid) : fmt::format("pid {}: {}", pid, command);
    }
  }
  return "";
}

void throw_sqlite_error(int rc, sqlite3* db, std::string_view context) {
  const int primary = rc & 0xff;
  StoreError::Kind kind = StoreError::Kind::io;
  if (primary == SQLITE_NOTADB) kind = StoreError::Kind::not_trainscope;
  if (primary == SQLITE_CORRUPT) kind = StoreError::Kind::corrupt;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) kind = StoreError::Kind::busy;
  if (kind == StoreError::Kind::busy && db != nullptr) {
    // Who holds it, in words a user can act on (issue 39: a raw "sqlite error 5" before).
    const char* name = sqlite3_db_filename(db, "main");
    const std::string file = name != nullptr ? name : "";
    const std::string holder = file.empty() ? std::string() : lock_holder(file);
    throw StoreError(kind, fmt::format("'{}' is locked by another process{}: gave up waiting for it (in {}); try "
                                       "again when it is done",
                                       file, holder.empty() ? "" : " (" + holder + ")", context));
  }
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  throw StoreError(kind, fmt::format("sqlite error {} ({}) in {}: {}", rc, sqlite3_errstr(rc), context, msg));
}

struct Db::LockWait {
  std::string file;
  std::chrono::milliseconds limit{5000};
  bool report = false;
  bool reported = false;  // in this wait
  std::chrono::steady_clock::time_point started, last_report;
};

void Db::LockWaitDeleter::operator()(LockWait* w) const noexcept { delete w; }

namespace {
// SQLite calls this while another connection holds the lock; `count` is 0 on a new wait.
// Returning 0 gives up (the statement fails with SQLITE_BUSY).
extern "C" int wait_for_lock(void* state, int count) {
  auto& w = *static_cast<Db::LockWait*>(state);
  const auto now = std::chrono::steady_clock::now();
  if (count == 0) {
    w.started = now;
    w.reported = false;
  }
  const auto waited = now - w.started;
  if (waited >= w.limit) return 0;
  if (w.report && waited >= std::chrono::seconds(2) &&
      (!w.reported || now - w.last_report >= std::chrono::seconds(5))) {
    w.reported = true;
    w.last_report = now;
    const auto secs = [](auto d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); };
    try {  // a C callback: nothing may leave it, and a notice that cannot be written is no error
      const std::string holder = lock_holder(w.file);
      fmt::print(stderr, "trainscope: '{}' is locked by another process{}: waited {} s, giving up after {} s\n", w.file,
                 holder.empty() ? "" : " (" + holder + ")", secs(waited), secs(w.limit));
    } catch (...) {
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(count + 1, 50)));
  return 1;
}
}  // namespace

void Db::set_lock_wait(std::chrono::milliseconds limit, bool report) {
  if (!lock_wait_) lock_wait_.reset(new LockWait);
  lock_wait_->limit = limit;
  lock_wait_->report = report;
  TS_SQLITE_CHECK(sqlite3_busy_handler(db_.get(), wait_for_lock, lock_wait_.get()), db_.get(),
                  "setting the busy handler");
}

Db::Db(const std::filesystem::path& path, int flags) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) throw StoreError(StoreError::Kind::io, fmt::format("cannot resolve '{}': {}", path.string(), ec.message()));
  open(absolute.string(), flags & ~SQLITE_OPEN_URI);  // a name that starts with '/' is never a URI
}

Db Db::from_uri(const std::string& uri, int flags) {
  Db db;
  db.open(uri, flags | SQLITE_OPEN_URI);
  return db;
}

void Db::open(const std::string& filename, int flags) {
  sqlite3* raw = nullptr;
  // NOMUTEX: a connection belongs to one Writer / Reader, which are not shared between threads.
  const int rc = sqlite3_open_v2(filename.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  db_.reset(raw);  // sqlite may hand back a handle even on failure; it must be closed either way
  TS_SQLITE_CHECK(rc, raw, fmt::format("opening '{}'", filename));
  TS_SQLITE_CHECK(sqlite3_extended_result_codes(raw, 1), raw, "enabling extended result codes");
  set_lock_wait(std::chrono::milliseconds(5000), false);
  lock_wait_->file = filename;
  if ((flags & SQLITE_OPEN_URI) == 0) registered_ = OpenFile(filename);  // URIs here are immutable: no locks
}

void Db::exec(std::string_view sql) {
  const std::string text(sql);
  TS_SQLITE_CHECK(sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, nullptr), db_.get(), text);
}

int64_t Db::query_int(std::string_view sql) {
  Stmt s(*this, sql);
  Stmt::Use use(s);
  return s.step() ? s.col_int(0) : 0;
}

std::string Db::query_text(std::string_view sql) {
  Stmt s(*this, sql);
  Stmt::Use use(s);
  return s.step() ? s.col_text(0) : std::string();
}

Stmt::Stmt(const Db& db, std::string_view sql) : db_(db.get()) {
  sqlite3_stmt* raw = nullptr;
  const int rc =
      sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  stmt_.reset(raw);
  TS_SQLITE_CHECK(rc, db_, sql);
}

void Stmt::reset() {
  sqlite3_reset(stmt_.get());  // returns the last step's code, which step() already reported
  TS_SQLITE_CHECK(sqlite3_clear_bindings(stmt_.get()), db_, sqlite3_sql(stmt_.get()));
}

Stmt& Stmt::bind(int index, int64_t value) {
  TS_SQLITE_CHECK(sqlite3_bind_int64(stmt_.get(), index, value), db_, sqlite3_sql(stmt_.get()));
  return *this;
}

Stmt& Stmt::bind(int index, double value) {
  TS_SQLITE_CHECK(sqlite3_bind_double(stmt_.get(), index, value), db_, sqlite3_sql(stmt_.get()));
  return *this;
}

Stmt& Stmt::bind(int index, std::string_view value) {
  // SQLITE_TRANSIENT: sqlite copies, so callers may pass temporaries.
  TS_SQLITE_CHECK(sqlite3_bind_text64(stmt_.get(), index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
                  db_, sqlite3_sql(stmt_.get()));
  return *this;
}

bool Stmt::step() {
  const int rc = sqlite3_step(stmt_.get());
  TS_SQLITE_CHECK(rc, db_, sqlite3_sql(stmt_.get()));
  return rc == SQLITE_ROW;
}

std::string Stmt::col_text(int index) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_.get(), index));
  const int n = sqlite3_column_bytes(stmt_.get(), index);
  return p != nullptr ? std::string(p, static_cast<size_t>(n)) : std::string();
}

Transaction::Transaction(Db& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);  // best effort while unwinding
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace ts::store::detail
