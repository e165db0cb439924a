#include "importers/nsys_export_reader.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <array>
#include <cstring>
#include <fstream>

namespace ts::importers {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSqliteMagic{"SQLite format 3\0", 16};

uint32_t big_endian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// The file's first 100 bytes (SQLite's header) checked: that it is SQLite, and not shorter than
// the size its header gives (SQLite itself would read the missing pages as damage, later, or not
// at all where no query reaches them).
void check_header(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw TraceError(TraceError::Kind::io, fmt::format("'{}' is not a file that can be read", file.string()));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw TraceError(TraceError::Kind::io, fmt::format("'{}' cannot be opened", file.string()));
  std::array<unsigned char, 100> header{};
  in.read(reinterpret_cast<char*>(header.data()), header.size());
  if (static_cast<size_t>(in.gcount()) < kSqliteMagic.size() ||
      std::memcmp(header.data(), kSqliteMagic.data(), kSqliteMagic.size()) != 0)
    throw TraceError(TraceError::Kind::foreign, fmt::format("'{}' is not an SQLite file", file.string()));
  if (in.gcount() < static_cast<std::streamsize>(header.size()))
    throw TraceError(
        TraceError::Kind::truncated,
        fmt::format("'{}' is cut short: {} bytes, less than SQLite's 100-byte header", file.string(), in.gcount()));
  // The page count at offset 28 is only valid where the change counter (24) equals the
  // version-valid-for number (92) (SQLite's file format, section 1.3).
  const uint32_t page_size_field = big_endian(&header[16], 2);
  const uint64_t page_size = page_size_field == 1 ? 65536 : page_size_field;
  const uint64_t pages = big_endian(&header[28], 4);
  if (big_endian(&header[24], 4) != big_endian(&header[92], 4) || pages == 0) return;
  const uint64_t expected = page_size * pages, size = fs::file_size(file, ec);
  if (!ec && size < expected)
    throw TraceError(TraceError::Kind::truncated,
                     fmt::format("'{}' is cut short: {} bytes of the {} its SQLite header gives ({} pages of {})",
                                 file.string(), size, expected, pages, page_size));
}

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql, const fs::path& file) : db_(db), file_(file) {
    check(sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr), sql);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool step(const std::string& sql) {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    check(rc, sql);
    return false;
  }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  void check(int rc, const std::string& sql) const {
    if (rc == SQLITE_OK || rc == SQLITE_DONE) return;
    // The file could not be read (io), or what was read is no export this import knows: a
    // damaged page, a column missing (malformed).
    const int code = rc & 0xff;
    const bool io = code == SQLITE_IOERR || code == SQLITE_CANTOPEN || code == SQLITE_PERM || code == SQLITE_BUSY ||
                    code == SQLITE_LOCKED;
    const auto kind = io ? TraceError::Kind::io : TraceError::Kind::malformed;
    throw TraceError(kind, fmt::format("'{}' cannot be read as an Nsight Systems export: {} (SQLite, in: {})",
                                       file_.string(), sqlite3_errmsg(db_), sql));
  }
  sqlite3* db_;
  const fs::path& file_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace

bool NsysExport::Row::null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int64_t NsysExport::Row::integer(int column) const { return sqlite3_column_int64(stmt_, column); }
std::string NsysExport::Row::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
           : std::string();
}

NsysExport::NsysExport(const fs::path& file) : file_(file) {
  check_header(file);
  // Read-only and never a URI (a name "file:..." is a path here); no mutex: one thread reads.
  const int rc = sqlite3_open_v2(fs::absolute(file).c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    throw TraceError(TraceError::Kind::io, fmt::format("'{}' cannot be opened: {}", file.string(), why));
  }
  try {
    each_row("SELECT name FROM sqlite_master WHERE type = 'table'",
             [&](const Row& row) { tables_.insert(row.text(0)); });
  } catch (...) {
    sqlite3_close_v2(db_);
    throw;
  }
  for (const std::string_view table : kNsysEventTables)
    if (has_table(table)) return;
  sqlite3_close_v2(db_);
  throw TraceError(TraceError::Kind::foreign,
                   fmt::format("'{}' is SQLite but no Nsight Systems export: it has none of the tables {}",
                               file.string(), fmt::join(kNsysEventTables, ", ")));
}

NsysExport::~NsysExport() { sqlite3_close_v2(db_); }

bool NsysExport::has_column(std::string_view table, std::string_view column) const {
  if (!has_table(table)) return false;
  bool found = false;
  // table_info takes a name, not a value: the table is one sqlite_master listed.
  each_row(fmt::format("SELECT name FROM pragma_table_info('{}')", table),
           [&](const Row& row) { found = found || row.text(0) == column; });
  return found;
}

void NsysExport::each_row(const std::string& sql, const std::function<void(const Row&)>& on_row) const {
  Statement statement(db_, sql, file_);
  const Row row(statement.get());
  while (statement.step(sql)) on_row(row);
}

int64_t NsysExport::integer(const std::string& sql) const {
  int64_t value = 0;
  bool first = true;
  each_row(sql, [&](const Row& row) {
    if (first) value = row.integer(0);
    first = false;
  });
  return value;
}

}  // namespace ts::importers
