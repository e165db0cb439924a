#include "cli/import_command.h"

#include <fstream>
#include <string_view>

#include "cli/progress.h"
#include "cli/run_config.h"
#include "fmt/format.h"
#include "importers/kineto_import.h"
#include "importers/nsys_import.h"
#include "store/import.h"

namespace ts::cli {

std::string import_runs(const std::filesystem::path& from, const std::filesystem::path& db) {
  std::error_code ec;
  if (std::filesystem::equivalent(from, db, ec))
    throw UsageError(fmt::format("'{}' and '{}' are the same file: nothing to import", from.string(), db.string()));
  store::Reader source(from);  // StoreError (exit 2) for a missing, foreign or newer file
  store::Writer::check_target(db);
  store::Writer target(db);
  target.check_integrity();
  store::Reader existing(db);
  std::string report;
  for (const store::RunRow& run : source.runs()) {
    const auto same = store::find_same_run(existing, run);
    if (!same) {
      const int64_t id = store::copy_run(source, run.id, target);
      report += fmt::format("run {} of '{}' -> run {} of '{}', {}\n", run.id, from.string(), id, db.string(),
                            store::to_string(run.status));
      continue;
    }
    // The same run is there (its streamed part, an earlier import): never replaced by less.
    const store::CopyChoice choice = store::choose_copy(existing, *existing.run(*same), source, run);
    if (choice.replace) {
      store::copy_run(source, run.id, target, *same);
      report += fmt::format("run {} of '{}' -> run {} of '{}' ({}), {}\n", run.id, from.string(), *same, db.string(),
                            choice.why, store::to_string(run.status));
    } else {
      report += fmt::format("run {} of '{}' is run {} of '{}': not imported ({})\n", run.id, from.string(), *same,
                            db.string(), choice.why);
    }
  }
  if (report.empty()) report = fmt::format("'{}' holds no runs: nothing imported\n", from.string());
  return report;
}

std::string import_trace(const TraceImportRequest& request) {
  if (request.batch < 0) throw UsageError(fmt::format("--batch must be 0 or more (got {})", request.batch));
  if (request.warmup < 0) throw UsageError(fmt::format("--warmup must be 0 or more (got {})", request.warmup));
  store::Writer::check_target(request.db);
  importers::ImportOptions options;
  options.workload = request.workload;
  options.preset = request.preset;
  options.batch_size = request.batch;
  options.warmup_steps = request.warmup;
  options.memory_timeline = request.memory_timeline;
  options.command_line = request.command_line;
  CountProgress survey("trainscope: surveyed", "record"), rows("trainscope: imported", "record");
  // Two passes (importers/kineto_import.h): the first counts the records the second writes.
  int64_t total = 0;
  bool surveyed = false;
  options.progress = [&](int pass, int64_t records) {
    if (pass == 1) {
      survey.update(records, records);
      total = records;
      return;
    }
    if (!surveyed) survey.finish();  // the survey's last line, once
    surveyed = true;
    rows.update(records, total);
  };
  // An SQLite file (its 16-byte magic) is an Nsight Systems export; anything else a Chrome trace.
  char magic[16] = {};
  std::ifstream(request.trace, std::ios::binary).read(magic, sizeof magic);
  const bool nsys = std::string_view(magic, sizeof magic) == std::string_view("SQLite format 3\0", 16);
  if (nsys && !request.memory_timeline.empty())
    throw UsageError("--memory-timeline goes with a PyTorch profiler trace, not an Nsight Systems export");
  importers::ImportedRun run;
  try {
    run = nsys ? importers::import_nsys_export(request.trace, request.db, options)
               : importers::import_kineto_trace(request.trace, request.db, options);
  } catch (const importers::TraceError& e) {
    throw UsageError(e.what());  // nothing was written
  }
  rows.finish();
  std::string out =
      fmt::format("run {} of '{}' ({}, {}): {} iterations, {} CPU events, {} GPU activities, {} memory points; {} "
                  "records with no place in the store left out\n",
                  run.run_id, request.db.string(), nsys ? "nsys" : "pytorch", run.device, run.iterations,
                  run.cpu_events, run.gpu_activities, run.memory_samples, run.left_out);
  for (const auto& what : run.absent) out += fmt::format("  absent in the trace: {}\n", what);
  return out;
}

}  // namespace ts::cli
