#pragma once
// `trainscope import FILE --db DB`: copies every run of FILE into DB. A spill file's run (the
// final write found the db locked) replaces the part of it streamed into DB before the spill.
#include <filesystem>
#include <string>

namespace ts::cli {

// Returns one line per run copied. Throws UsageError for a bad FILE or DB (nothing written).
std::string import_runs(const std::filesystem::path& from, const std::filesystem::path& db);

}  // namespace ts::cli
