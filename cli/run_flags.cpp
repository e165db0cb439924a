#include "cli/run_flags.h"

#include <CLI/CLI.hpp>

#include <filesystem>

#include "fmt/format.h"

namespace ts::cli {

namespace {

using session::OptionType;
using json = nlohmann::json;

// The default as the help shows it; empty where there is none to show (an optional, a flag).
std::string default_text(const session::RunOption& o, const RunConfig& defaults) {
  const json v = o.get(defaults);
  if (v.is_null() || o.type == OptionType::flag || o.type == OptionType::pairs) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  return v.dump();
}

}  // namespace

void RunFlags::add(CLI::App& command, const session::RunOption& o, std::string_view help_text) {
  // Whole decimal numbers that fit, or exit 2: CLI11 alone clamps 99999999999999999999 to the
  // largest int64 and wraps --seed -1. Integer ranges are validate()'s.
  static const CLI::Validator int64_text(check_int64_text, "");
  static const CLI::Validator uint64_text(check_uint64_text, "");
  Binding& b = bindings_.emplace_back();
  b.option = &o;
  const std::string help(help_text);
  const std::string name = o.name == "workload" ? std::string(o.name) : o.flag();
  switch (o.type) {
    case OptionType::text: b.cli = command.add_option(name, b.text, help); break;
    case OptionType::integer: b.cli = command.add_option(name, b.integer, help)->transform(int64_text); break;
    case OptionType::count: b.cli = command.add_option(name, b.count, help)->transform(uint64_text); break;
    case OptionType::number: b.cli = command.add_option(name, b.number, help); break;  // range: apply_options
    case OptionType::flag: b.cli = command.add_flag(name, b.flag, help); break;
    case OptionType::pairs: b.cli = command.add_option(name, b.list, help); break;
  }
  if (!o.choices.empty() && !set_by_strategy(o)) {
    b.cli->check(CLI::IsMember(std::vector<std::string>(o.choices.begin(), o.choices.end())));
  }
  if (const auto shown = default_text(o, defaults_); !shown.empty()) b.cli->default_str(shown);
  if (o.name == "workload") b.cli->required();
}

RunFlags::RunFlags(CLI::App& run) {
  for (const auto& o : session::run_options()) add(run, o, o.help);
  // A launcher's ranks get their whole config in one word (rank_arguments).
  rank_config_ = run.add_option("--rank-config", rank_config_word_)->group("");
}

RunFlags::RunFlags(CLI::App& command, std::span<const SharedOption> shared, const RunConfig& defaults)
    : defaults_(defaults) {
  for (const auto& s : shared) {
    const auto& o = session::run_option(s.name);
    add(command, o, s.help.empty() ? o.help : s.help);
  }
}

RunConfig RunFlags::config(const std::string& command_line) const {
  if (rank_config_ && *rank_config_) {
    try {
      return session::config_from_document(session::decode_document(rank_config_word_));
    } catch (const std::exception& e) {
      throw UsageError(std::string("--rank-config: ") + e.what());
    }
  }
  std::vector<GivenOption> given;
  for (const auto& b : bindings_) {
    if (!*b.cli) continue;
    const auto& o = *b.option;
    json value;
    switch (o.type) {
      case OptionType::text: value = b.text; break;
      case OptionType::integer: value = b.integer; break;
      case OptionType::count: value = b.count; break;
      case OptionType::number: value = b.number; break;
      case OptionType::flag: value = o.negated ? !b.flag : b.flag; break;
      case OptionType::pairs:
        value = json::array();
        for (const auto& m : b.list) {
          auto pair = split_mca(m);
          if (!pair) throw UsageError(o.flag() + " takes NAME=VALUE, not '" + m + "'");
          value.push_back(json(*pair));
        }
        break;
    }
    given.push_back({&o, std::move(value)});
  }
  RunConfig c = defaults_;
  c.command_line = command_line;
  apply_options(given, c);
  return c;
}

std::vector<std::string> rank_arguments(const RunConfig& config) {
  RunConfig c = config;
  c.db = std::filesystem::absolute(c.db);
  // The workload and the db stay readable in `ps` (a run's ranks are found by its db); the
  // document is what the rank reads, these flags then change nothing.
  return {"run",         c.workload,      "--db",
          c.db.string(), "--rank-config", session::encode_document(session::rank_document(c))};
}

}  // namespace ts::cli
