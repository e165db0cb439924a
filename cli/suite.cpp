#include "cli/suite.h"

#include <toml++/toml.h>

#include "cli/exit_codes.h"
#include "cli/run_command.h"
#include "cli/summary.h"
#include "fmt/format.h"
#include "store/reader.h"

namespace ts::cli {

std::vector<RunConfig> Suite::expand() const {
  std::vector<RunConfig> out;
  for (const auto& e : entries) {
    std::vector<std::optional<int64_t>> batches;
    for (auto b : e.batches) batches.emplace_back(b);
    if (batches.empty()) batches.emplace_back(std::nullopt);
    for (const auto& b : batches) {
      for (int64_t r = 0; r < e.repeats; ++r) {
        RunConfig c = e.config;
        c.batch = b;
        out.push_back(c);
      }
    }
  }
  return out;
}

Suite load_suite(const std::filesystem::path& file, const std::filesystem::path& db) {
  toml::table doc;
  try {
    doc = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("{}: {} (line {})", file.string(), e.description(), e.source().begin.line));
  }
  Suite s;
  s.name = doc["name"].value_or(file.stem().string());
  const toml::array* runs = doc["run"].as_array();
  if (!runs || runs->empty()) throw UsageError(file.string() + ": no [[run]] entries");
  size_t index = 0;
  for (const auto& node : *runs) {
    ++index;
    const toml::table* t = node.as_table();
    const std::string where = fmt::format("{}: run #{}", file.string(), index);
    if (!t) throw UsageError(where + " is not a table");
    static const std::vector<std::string> known = {"workload", "preset", "device", "batch", "iterations", "warmup",
                                                   "repeats", "threads", "seed", "data", "trace", "eval_batches",
                                                   "learners"};
    for (const auto& [k, _] : *t) {
      if (std::find(known.begin(), known.end(), std::string(k.str())) == known.end()) {
        throw UsageError(fmt::format("{}: unknown key '{}'", where, k.str()));
      }
    }
    SuiteEntry e;
    auto& c = e.config;
    const auto workload = (*t)["workload"].value<std::string>();
    if (!workload) throw UsageError(where + ": 'workload' is required");
    c.workload = *workload;
    c.preset = (*t)["preset"].value_or(std::string("tiny"));
    c.device = (*t)["device"].value_or(std::string("cpu"));
    c.data = (*t)["data"].value_or(std::string("synthetic"));
    c.iterations = (*t)["iterations"].value_or(int64_t{20});
    c.warmup = (*t)["warmup"].value_or(int64_t{3});
    c.threads = (*t)["threads"].value_or(int64_t{0});
    c.seed = static_cast<uint64_t>((*t)["seed"].value_or(int64_t{1}));
    c.trace = (*t)["trace"].value_or(true);
    c.eval_batches = (*t)["eval_batches"].value_or(int64_t{2});
    if (t->contains("learners")) {
      const auto v = (*t)["learners"].value<int64_t>();
      if (!v) throw UsageError(where + ": 'learners' must be an integer");
      c.learners = *v;
    }
    c.db = db;
    c.command_line = "suite " + file.string() + " #" + std::to_string(index);
    e.repeats = (*t)["repeats"].value_or(int64_t{1});
    if (e.repeats <= 0) throw UsageError(where + ": 'repeats' must be positive");
    if (const auto* arr = (*t)["batch"].as_array()) {
      for (const auto& b : *arr) {
        const auto v = b.value<int64_t>();
        if (!v || *v <= 0) throw UsageError(where + ": 'batch' must hold positive integers");
        e.batches.push_back(*v);
      }
    } else if (const auto v = (*t)["batch"].value<int64_t>()) {
      if (*v <= 0) throw UsageError(where + ": 'batch' must be positive");
      e.batches.push_back(*v);
    }
    try {
      validate(c);
    } catch (const UsageError& err) {
      throw UsageError(where + ": " + err.what());
    }
    s.entries.push_back(std::move(e));
  }
  return s;
}

int run_suite(const Suite& suite, bool json) {
  const auto runs = suite.expand();
  int worst = kExitOk;
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& c = runs[i];
    const std::string label =
        fmt::format("[{}/{}] {}/{} batch {}", i + 1, runs.size(), c.workload, c.preset, c.batch ? std::to_string(*c.batch) : "default");
    const RunOutcome out = execute_run(c, label);
    const auto summary = run_summary(c.db, out.run_id);
    if (json) {
      all.push_back(summary);
    } else {
      fmt::print("{}\n", format_summary(summary));
    }
    if (out.exit_code == kExitInterrupted) {
      worst = kExitInterrupted;
      break;
    }
    worst = std::max(worst, out.exit_code);
  }
  if (json) fmt::print("{}\n", all.dump(2));
  return worst;
}

}  // namespace ts::cli
