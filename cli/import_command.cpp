#include "cli/import_command.h"

#include "cli/run_config.h"
#include "fmt/format.h"
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

}  // namespace ts::cli
