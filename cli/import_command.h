#pragma once
// `trainscope import FILE --db DB`: copies every run of FILE into DB. A spill file's run (the
// final write found the db locked) replaces the part of it streamed into DB before the spill.
#include <filesystem>
#include <string>

namespace ts::cli {

// Returns one line per run copied. Throws UsageError for a bad FILE or DB (nothing written).
std::string import_runs(const std::filesystem::path& from, const std::filesystem::path& db);

// `trainscope import-trace FILE --db DB [--workload NAME] [--preset P] [--batch N]`: a PyTorch
// profiler trace (Kineto's Chrome trace JSON, .json or .json.gz) or, an SQLite file, an Nsight
// Systems export read into DB as a run (importers/kineto_import.h, importers/nsys_import.h;
// docs/import.md). Returns what was stored and what the trace lacks.
// Throws UsageError for a file that is missing, not a trace, malformed or cut short, or a bad DB
// (nothing written).
struct TraceImportRequest {
  std::filesystem::path trace, db = "results/trainscope.db";
  std::string workload, preset = "-";
  int64_t batch = 0;
  int64_t warmup = 0;                     // steps
  std::filesystem::path memory_timeline;  // PyTorch's, beside a Kineto trace (empty: none)
  std::string command_line;
};
std::string import_trace(const TraceImportRequest& request);

}  // namespace ts::cli
