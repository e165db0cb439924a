#pragma once
// Raw SQLite for the store's tests: what the file holds, read (and written) around the code under
// test.
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "store/open.h"
#include "store/schema.h"

namespace ts::store::test_support {

// Raw SQLite, around the code under test.
struct Raw {
  explicit Raw(const std::filesystem::path& p) {
    if (sqlite3_open(p.c_str(), &db) != SQLITE_OK) throw std::runtime_error("open failed");
  }
  ~Raw() { sqlite3_close(db); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err != nullptr ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(msg + " in " + sql);
    }
  }
  int64_t integer(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
    const int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
  }
  // EXPLAIN QUERY PLAN's details, joined.
  std::string plan(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, ("EXPLAIN QUERY PLAN " + sql).c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(sqlite3_errmsg(db));
    std::string out;
    while (sqlite3_step(s) == SQLITE_ROW)
      out += std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 3))) + "; ";
    sqlite3_finalize(s);
    return out;
  }
  sqlite3* db = nullptr;
};

// A file as trainscope wrote it at schema `version` (every migration up to it, its pragmas), with
// one completed resnet50 run of `ranks` ranks (id 1): what a migration test starts from.
inline void write_old_file(const std::filesystem::path& path, int version, int ranks) {
  Raw raw(path);
  std::string ddl;
  for (int v = 0; v < version; ++v) ddl += std::string(detail::migration_sql(v));
  raw.exec(ddl);
  raw.exec("PRAGMA user_version = " + std::to_string(version) +
           "; PRAGMA application_id = " + std::to_string(kApplicationId));
  raw.exec("INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
           "parameter_count, started_at, command_line, config_json, status, ranks) VALUES ('resnet50', 'tiny', 'cpu', "
           "4, 2, 1, 1, 1, 1, 100, '2026-11-22T00:00:00Z', 'trainscope run', '{}', 'completed', " +
           std::to_string(ranks) + ");");
}

}  // namespace ts::store::test_support
