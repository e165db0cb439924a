#include "cli/report_command.h"

#include <stdexcept>
#include <system_error>

#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/run_config.h"
#include "fmt/format.h"
#include "reports/comparison.h"
#include "reports/document.h"
#include "reports/output_file.h"
#include "reports/suite_report.h"
#include "store/error.h"
#include "vocabulary/memory_category.h"

namespace ts::cli {

namespace {

std::vector<reports::RunDigest> select(const std::filesystem::path& db, const std::vector<std::string>& selectors,
                                       reports::DigestParts parts = {}) {
  try {
    return reports::select_runs(db, selectors, vocabulary::tbd_class_of, parts);
  } catch (const store::StoreError& e) {
    throw UsageError(e.what());
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// Every output is checked before any is written, so a bad last path leaves no first file behind.
void write_outputs(const ReportOutputs& out, const std::filesystem::path& db, const reports::Document& doc,
                   const nlohmann::json& json) {
  const reports::Replace replace = out.replace();
  for (const auto* p : {&out.html, &out.markdown, &out.json}) {
    if (!p->empty()) reports::check_output_path(*p, db, replace);
  }
  const auto write = [&](const std::filesystem::path& path, const std::string& text) {
    if (path.empty()) return;
    reports::write_output_file(path, db, replace, [&](reports::OutputFile& f) { f.write(text); });
    say(stderr, "trainscope: wrote {}\n", path.string());
  };
  const std::string html = out.html.empty() ? std::string() : reports::to_html(doc);  // may throw: no Chart.js
  write(out.html, html);
  write(out.markdown, reports::to_markdown(doc));
  write(out.json, reports::own_json_text(json));
}

struct Side {
  std::filesystem::path db;
  std::vector<reports::RunDigest> runs;
  std::string label;
};

// A db file: all its runs; otherwise run ids, ranges or a suite name (comma-separated) in `db`.
// What compare_runs reads of a digest: no interference (reading it costs every event of a run).
constexpr reports::DigestParts kCompared{.interference = false};

Side resolve_side(const std::string& arg, const std::filesystem::path& db) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(arg, ec)) return {arg, select(arg, {}, kCompared), arg};
  std::vector<std::string> selectors;
  size_t from = 0;
  while (from <= arg.size()) {
    const size_t comma = arg.find(',', from);
    const std::string part = arg.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (part.empty()) throw UsageError(fmt::format("'{}': neither a db file nor run ids, ranges or a suite name", arg));
    selectors.push_back(part);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return {db, select(db, selectors, kCompared), fmt::format("{} in {}", arg, db.string())};
}

}  // namespace

int execute_report(const ReportRequest& r) {
  const auto runs = select(r.db, r.selectors);
  if (runs.empty()) throw UsageError(fmt::format("{} holds no training run to report", r.db.string()));
  const std::string source =
      r.selectors.empty() ? r.db.string() : fmt::format("{} ({})", r.db.string(), fmt::join(r.selectors, " "));
  const auto doc = reports::suite_report_document(runs, source);
  try {
    if (r.out.any()) {
      write_outputs(r.out, r.db, doc, reports::suite_report_json(runs, source));
    } else {
      say("{}", reports::to_markdown(doc));
    }
  } catch (const reports::OutputRefused&) {
    throw;
  } catch (const std::runtime_error& e) {  // no Chart.js, a failed write
    throw UsageError(e.what());
  }
  return kExitOk;
}

int execute_compare(const CompareRequest& r) {
  if (r.fail_on_regression_pct && !(*r.fail_on_regression_pct >= 0 && *r.fail_on_regression_pct < 1000)) {
    throw UsageError("--fail-on-regression takes a percentage from 0 to 1000");
  }
  if (!(r.memory_tolerance_pct >= 0 && r.memory_tolerance_pct < 1000)) {
    throw UsageError("--memory-tolerance takes a percentage from 0 to 1000");
  }
  const Side base = resolve_side(r.base, r.db);
  const Side next = resolve_side(r.next, r.db);
  reports::GateOptions gate;
  gate.fail_on_regression_pct = r.fail_on_regression_pct;
  gate.memory_tolerance_pct = r.memory_tolerance_pct;
  reports::Comparison c;
  try {
    c = reports::compare_runs(base.runs, next.runs, base.label, next.label, gate);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const auto doc = reports::comparison_document(c);
  try {
    say("{}", reports::to_markdown(doc));
    for (const auto* p : {&r.out.html, &r.out.markdown, &r.out.json}) {
      if (!p->empty())  // write_outputs checks against base's
        reports::check_output_path(*p, next.db, r.out.replace());
    }
    if (r.out.any()) write_outputs(r.out, base.db, doc, reports::comparison_json(c));
  } catch (const reports::OutputRefused&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  if (!c.gated) return kExitOk;
  if (c.regressions.empty() && !c.inconclusive.empty()) {
    for (const auto& line : c.inconclusive) say(stderr, "trainscope: not judged: {}\n", line);
    say(stderr, "trainscope: regression gate inconclusive: not a pass (exit {})\n", kExitInconclusive);
    return kExitInconclusive;
  }
  if (c.regressions.empty()) {
    say(stderr, "trainscope: regression gate passed ({} configuration{} compared)\n", c.pairs.size(),
        c.pairs.size() == 1 ? "" : "s");
    return kExitOk;
  }
  for (const auto& line : c.regressions) say(stderr, "trainscope: regression: {}\n", line);
  return kExitRunFailed;
}

}  // namespace ts::cli
