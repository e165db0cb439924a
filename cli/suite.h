#pragma once
// `trainscope suite FILE`: a TOML list of runs (workload, preset, device, batch sizes,
// iterations, warm-up, repeats), run in turn into one db.
#include <filesystem>
#include <string>
#include <vector>

#include "cli/run_config.h"

namespace ts::cli {

struct SuiteEntry {
  RunConfig config;   // batch set per expansion
  std::vector<int64_t> batches;   // empty: the preset's default
  int64_t repeats = 1;
};

struct Suite {
  std::string name;
  std::vector<SuiteEntry> entries;
  // One RunConfig per run, batches and repeats expanded.
  std::vector<RunConfig> expand() const;
};

// Parses and validates the whole file first (UsageError naming the file, entry and key).
Suite load_suite(const std::filesystem::path& file, const std::filesystem::path& db);

// Runs every entry; returns the exit code (the worst of the runs; 130 at once on Ctrl-C).
int run_suite(const Suite& suite, bool json);

}  // namespace ts::cli
