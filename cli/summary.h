#pragma once
// The one-screen summary of a run, always read back from the db (so `run` and `show` agree).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "reports/number_format.h"
#include "store/liveness.h"
#include "store/records.h"

namespace ts::cli {

// Throws UsageError when the db or the run does not exist.
nlohmann::json run_summary(const std::filesystem::path& db, int64_t run_id);
std::string format_summary(const nlohmann::json& summary);
// The summary's "roofline" section (docs/formulas.md, "Roofline"), as `show` prints it.
std::string format_roofline(const nlohmann::json& roofline);
// Per-layer forward/backward time, activation bytes and parameters (like `caffe time`),
// the `limit` slowest layers (0: all), in model order.
std::string format_layers(const std::filesystem::path& db, int64_t run_id, int64_t limit);
// The same rows as `show --json --layers` gives them (milliseconds per timed iteration).
nlohmann::json layers_json(const std::filesystem::path& db, int64_t run_id, int64_t limit);
// The runs of a db as a table; `only`: those runs, in that order (a suite's; empty: every run).
std::string format_runs(const std::filesystem::path& db, const std::vector<int64_t>& only = {});
using reports::counted;
using reports::human_bytes;
using reports::plural;
using reports::units_for;
using reports::with_commas;

}  // namespace ts::cli
