#pragma once
// An Nsight Systems SQLite export (`nsys export --type sqlite`, or the .sqlite `nsys stats` leaves
// beside a report) opened for reading (issue 42): read-only, never written. Which of the export's
// tables it holds (nsys makes them lazily: a CPU-only report has no kernel table) and their
// columns, and queries streamed row by row (SQLite sorts what does not fit in memory in its temp
// files), so memory stays bounded whatever the file's size. Schema: docs/import.md.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <string_view>

#include "importers/trace_records.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ts::importers {

// The tables an import reads its records from; an export needs at least one of them.
inline constexpr std::string_view kNsysEventTables[] = {"NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                                        "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                                        "CUPTI_ACTIVITY_KIND_MEMSET"};

class NsysExport {
 public:
  // A row of a query: columns by position, as SQLite holds them.
  class Row {
   public:
    explicit Row(sqlite3_stmt* stmt) : stmt_(stmt) {}
    bool null(int column) const;
    int64_t integer(int column) const;   // 0 for NULL
    std::string text(int column) const;  // "" for NULL

   private:
    sqlite3_stmt* stmt_;
  };

  // Opens `file` read-only. TraceError: missing or unreadable (io), not SQLite or SQLite without
  // any of kNsysEventTables (foreign), shorter than its header says (truncated), or a file SQLite
  // cannot read its schema from (malformed).
  explicit NsysExport(const std::filesystem::path& file);
  ~NsysExport();
  NsysExport(const NsysExport&) = delete;
  NsysExport& operator=(const NsysExport&) = delete;

  bool has_table(std::string_view table) const { return tables_.contains(table); }
  bool has_column(std::string_view table, std::string_view column) const;
  // Runs `sql` and calls `on_row` for every row, as SQLite steps to it. A page SQLite cannot read
  // (a damaged file) is a TraceError (malformed) naming the file.
  void each_row(const std::string& sql, const std::function<void(const Row&)>& on_row) const;
  // The first column of the first row as an integer (0 when there is no row or it is NULL).
  int64_t integer(const std::string& sql) const;

 private:
  std::filesystem::path file_;
  sqlite3* db_ = nullptr;
  std::set<std::string, std::less<>> tables_;
};

}  // namespace ts::importers
