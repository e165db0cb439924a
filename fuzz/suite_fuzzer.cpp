// libFuzzer target: the input is a suite file's text. load_suite must either load it or refuse it
// with UsageError; a crash, a sanitizer report, any other exception or a loaded suite that breaks
// the documented ranges is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "cli/suite.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_suite: %s\n", what);
  std::abort();
}

// The ranges docs/cli.md promises for every run a suite can produce.
void check_run(const ts::cli::RunConfig& c) {
  if (c.workload.empty()) finding("a run without a workload");
  if (c.iterations < 1 || c.iterations > 1'000'000'000) finding("iterations out of range");
  if (c.warmup < 0 || c.warmup > 1'000'000'000) finding("warmup out of range");
  if (c.threads < 0 || c.threads > 1024) finding("threads out of range");
  if (c.eval_batches < 0 || c.eval_batches > 1'000'000) finding("eval_batches out of range");
  if (c.seed > static_cast<uint64_t>(INT64_MAX)) finding("seed out of range");
  if (c.batch && (*c.batch < 1 || *c.batch > INT32_MAX)) finding("batch out of range");
  if (c.learners && (*c.learners < 1 || *c.learners > 4096)) finding("learners out of range");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Never created: validate() only checks that it could be.
  static const std::filesystem::path db = std::filesystem::temp_directory_path() / "trainscope-fuzz" / "never.db";
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ts::cli::Suite suite = ts::cli::load_suite(text, "fuzz.toml", db);
    // The lazy expansion's edges are where its index arithmetic would go wrong.
    const uint64_t count = suite.run_count();
    if (count == 0) finding("a loaded suite with no runs");
    check_run(suite.run_at(0));
    check_run(suite.run_at(count - 1));
    try {
      (void)suite.run_at(count);
      finding("run_at(run_count()) did not throw");
    } catch (const std::out_of_range&) {
    }
  } catch (const ts::cli::UsageError&) {
    // Refused with a message: the expected outcome for most inputs.
  }
  return 0;
}
