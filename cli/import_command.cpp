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
  store::Reader existing(db);
  std::string report;
  for (const store::RunRow& run : source.runs()) {
    const auto streamed = store::find_same_run(existing, run);
    const int64_t id = store::copy_run(source, run.id, target, streamed.value_or(0));
    report += streamed ? fmt::format("run {} of '{}' -> run {} of '{}' (replacing its streamed part), {}\n", run.id,
                                     from.string(), id, db.string(), store::to_string(run.status))
                       : fmt::format("run {} of '{}' -> run {} of '{}', {}\n", run.id, from.string(), id, db.string(),
                                     store::to_string(run.status));
  }
  if (report.empty()) report = fmt::format("'{}' holds no runs: nothing imported\n", from.string());
  return report;
}

}  // namespace ts::cli
