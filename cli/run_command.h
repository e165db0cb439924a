#pragma once
// `trainscope run`: one profiled training run, stored in the db.
#include <cstdint>
#include <filesystem>
#include <string>

#include "cli/run_config.h"

namespace ts::cli {

struct RunOutcome {
  int64_t run_id = 0;
  int exit_code = 0;
  std::filesystem::path spill_file;  // set when the db refused the final write (exit code kExitSpilled)
};

// Validates (UsageError, nothing written), then trains and stores the run. Failures after
// the run row exists are stored (status failed/interrupted) and reflected in exit_code.
// `progress_label` prefixes progress lines (the suite passes its position).
RunOutcome execute_run(const RunConfig& config, const std::string& progress_label = "");

// The run's summary (cli/summary.h) from where it is whole: the spill file when the db refused
// its final write (the db may be gone), else the db.
nlohmann::json stored_summary(const std::filesystem::path& db, const RunOutcome& out);

}  // namespace ts::cli
