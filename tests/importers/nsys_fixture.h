#pragma once
// The checked-in Nsight Systems export fixture (tests/importers/fixtures/nsys_small.sql, SQL
// text) built into an SQLite file with SQLite's own API, as `nsys export --type sqlite` leaves one.
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ts::testing {

inline const std::filesystem::path kNsysFixtureSql =
    std::filesystem::path(TS_SOURCE_DIR) / "tests/importers/fixtures/nsys_small.sql";

// Runs the fixture's SQL, then `then` (a variant: tables dropped), into a new file `out`.
inline std::filesystem::path build_nsys_export(const std::filesystem::path& out, const std::string& then = "") {
  std::ifstream in(kNsysFixtureSql);
  std::stringstream sql;
  sql << in.rdbuf();
  if (!in) throw std::runtime_error("cannot read " + kNsysFixtureSql.string());
  sqlite3* db = nullptr;
  if (sqlite3_open(out.c_str(), &db) != SQLITE_OK) throw std::runtime_error("cannot create " + out.string());
  char* error = nullptr;
  const int rc = sqlite3_exec(db, (sql.str() + then).c_str(), nullptr, nullptr, &error);
  const std::string why = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error(kNsysFixtureSql.string() + ": " + why);
  return out;
}

}  // namespace ts::testing
