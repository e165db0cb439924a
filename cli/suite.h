#pragma once
// `trainscope suite FILE`: a TOML list of runs (workload, preset, device, batch sizes,
// iterations, warm-up, repeats), run in turn into one db. Each run records which suite, entry
// and repeat it is (config "suite"), so reports and comparisons can find and pair them.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cli/run_config.h"

namespace ts::cli {

struct SuiteEntry {
  RunConfig config;              // batch set per expansion
  std::vector<int64_t> batches;  // empty: the preset's default
  int64_t repeats = 1;
};

struct Suite {
  std::string name;
  std::vector<SuiteEntry> entries;
  // Interleaved (the default): round r runs every entry and batch that has an r-th repeat, in
  // file order (A B A B), so slow drift of the machine spreads over all of them alike instead of
  // falling on one. Otherwise grouped: entry, then batch, then repeat (A A B B).
  bool interleave = true;
  // The runs in that order, built one at a time rather than all up front: `repeats` may be up to
  // a million per entry.
  uint64_t run_count() const;
  RunConfig run_at(uint64_t index) const;  // throws std::out_of_range past run_count()
};

// Parses and validates the whole file first: every key type- and range-checked, unknown or
// misplaced keys refused; UsageError "FILE:LINE: run #N: key 'K' ..." on the first problem.
Suite load_suite(const std::filesystem::path& file, const std::filesystem::path& db);
// The same for a suite file's text; `display_name` stands for the file in messages (fuzzing, tests).
Suite load_suite(std::string_view text, const std::string& display_name, const std::filesystem::path& db);
// The same without validate() on each entry (which knows this machine: its cores, devices, the
// db): every key type- and range-checked, as written. For tests of the option table.
Suite parse_suite(std::string_view text, const std::string& display_name, const std::filesystem::path& db);

// Runs every entry; returns the exit code (the worst of the runs; 130 at once on Ctrl-C).
int run_suite(const Suite& suite, bool json);

}  // namespace ts::cli
