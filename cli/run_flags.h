#pragma once
// `trainscope run`'s flags, derived from the option table (session/run_options.h): one CLI11
// option per declared option, and the hidden --rank-config a launcher hands its ranks.
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/run_config.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace ts::cli {

// An option another command shares with `run` (the collectives benchmark: the launch, the db,
// --json): its name in the table, and the help it has there where the table's would mislead.
struct SharedOption {
  std::string_view name;
  std::string_view help = {};  // empty: the table's
};

class RunFlags {
 public:
  // Adds the options to `run` (the subcommand); the object must outlive its parsing.
  explicit RunFlags(CLI::App& run);
  // Adds only `shared` to `command`, with `defaults`' values as their defaults: their flags,
  // types, ranges and checks are the table's, so the two commands cannot drift apart.
  RunFlags(CLI::App& command, std::span<const SharedOption> shared, const RunConfig& defaults);
  RunFlags(const RunFlags&) = delete;
  RunFlags& operator=(const RunFlags&) = delete;

  // After parsing: the config the flags ask for (UsageError on bad input), or a rank's config
  // as its launcher serialised it. `command_line` is what the user typed.
  RunConfig config(const std::string& command_line) const;

 private:
  struct Binding {
    const session::RunOption* option = nullptr;
    CLI::Option* cli = nullptr;
    std::string text;
    int64_t integer = 0;
    uint64_t count = 0;
    double number = 0;
    bool flag = false;
    std::vector<std::string> list;
  };
  // One CLI11 option for the table's `o`, with `help` and `defaults`' value as its default.
  void add(CLI::App& command, const session::RunOption& o, std::string_view help);

  RunConfig defaults_;
  std::deque<Binding> bindings_;  // a deque: CLI11 keeps pointers into each binding
  CLI::Option* rank_config_ = nullptr;
  std::string rank_config_word_;
};

// The ranks' arguments for `config`: `run WORKLOAD --db DB --rank-config HEX`, the document
// (session::rank_document) with the db made absolute, as the ranks may start elsewhere.
std::vector<std::string> rank_arguments(const RunConfig& config);

}  // namespace ts::cli
