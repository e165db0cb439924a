#pragma once
// `trainscope report` and `trainscope compare`: the cli's side of reports/ (parsing what to read
// and where to write; the figures and their statistics are reports/'s).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "reports/output_file.h"

namespace ts::cli {

struct ReportOutputs {
  std::filesystem::path html, markdown, json;  // empty: not written
  bool force = false;                          // --force: replace files trainscope did not write
  bool any() const { return !html.empty() || !markdown.empty() || !json.empty(); }
  reports::Replace replace() const { return force ? reports::Replace::anything : reports::Replace::ours_only; }
};

struct ReportRequest {
  std::filesystem::path db;
  std::vector<std::string> selectors;  // run ids, ranges A-B, suite names; none: every run
  ReportOutputs out;
};
// Prints the Markdown when no output is asked for; returns the exit code (0). UsageError on bad input.
int execute_report(const ReportRequest& request);

struct CompareRequest {
  std::string base, next;  // each a db file (every run in it), or run ids / a suite name in `db`
  std::filesystem::path db;
  ReportOutputs out;
  std::optional<double> fail_on_regression_pct;
  double memory_tolerance_pct = 0;
};
// Prints the comparison (Markdown) and the gate's verdict; 0, or 1 when the gate found a
// regression. Every other failure is bad input (UsageError, exit 2): a gate must never read a
// broken comparison as a regression, nor as a pass.
int execute_compare(const CompareRequest& request);

}  // namespace ts::cli
