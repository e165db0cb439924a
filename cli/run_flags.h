#pragma once
// `trainscope run`'s flags, derived from the option table (session/run_options.h): one CLI11
// option per declared option, and the hidden --rank-config a launcher hands its ranks.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "cli/run_config.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace ts::cli {

class RunFlags {
 public:
  // Adds the options to `run` (the subcommand); the object must outlive its parsing.
  explicit RunFlags(CLI::App& run);
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
  std::deque<Binding> bindings_;  // a deque: CLI11 keeps pointers into each binding
  CLI::Option* rank_config_ = nullptr;
  std::string rank_config_word_;
};

// The ranks' arguments for `config`: `run WORKLOAD --db DB --rank-config HEX`, the document
// (session::rank_document) with the db made absolute, as the ranks may start elsewhere.
std::vector<std::string> rank_arguments(const RunConfig& config);

}  // namespace ts::cli
