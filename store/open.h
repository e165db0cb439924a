#pragma once
// Internal: file identification, schema creation and migration shared by Writer and Reader.
#include <chrono>
#include <filesystem>
#include <string_view>

#include "store/sqlite.h"

namespace ts::store::detail {

struct FileInfo {
  int version = 0;     // PRAGMA user_version (0 for an empty file)
  bool empty = false;  // zero bytes, or a SQLite file without any schema objects and no app id
};

// Identifies an existing file WITHOUT modifying it: not a SQLite file or a foreign SQLite db ->
// not_trainscope; ours but newer than kSchemaVersion -> newer_schema; a directory -> io.
// `immutable` opens with immutable=1 (no locks, no -wal/-shm files created): used by check_target.
FileInfo inspect(const std::filesystem::path& path, bool immutable);

// Opens (creating when missing) for writing: WAL, foreign_keys, schema migrated to kSchemaVersion.
// Another process's lock is waited for up to `lock_wait`, saying so on stderr (Db::set_lock_wait).
Db open_for_write(const std::filesystem::path& path, std::chrono::milliseconds lock_wait);

// The SQL of migration step `from_version` -> `from_version + 1` (tests build old files with it).
std::string_view migration_sql(int from_version);

// Opens an existing trainscope file read-only (missing -> not_found); returns its schema version.
Db open_for_read(const std::filesystem::path& path, int& version);

}  // namespace ts::store::detail
