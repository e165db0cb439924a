#pragma once
// Every option of a run, declared once: its flag, type, range, help, suite key and stored key,
// and how it reads and writes its RunConfig field. The cli's flags, the suite keys, the range
// checks, the ranks' configuration and the stored config are all derived from this table, so a
// new knob is one entry here (and its field in run_config.h).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "session/run_config.h"

namespace ts::session {

enum class OptionType {
  text,     // a string (paths included)
  integer,  // int64, range [min, max]
  count,    // uint64 (the seed): any non-negative integer
  number,   // double, range [min, max] where given
  flag,     // bool; on the command line `--NAME`, or `--no-NAME` when `negated`
  pairs,    // NAME=VALUE list (--mca): a JSON array of [name, value]
};

// Which strategy an option belongs to: the other strategy refuses it.
enum class OptionScope { any, allreduce, ps };

// Where the stored config (store's config_json) keeps an option.
enum class Stored {
  none,        // not stored
  top,         // at the top level
  top_if_set,  // at the top level unless unset (null) or at its default
  resolved,    // at the top level, as the run resolved it (the preset's batch, the threads used)
  strategy,    // under "distributed", when the run is distributed with the option's strategy (any: both)
};

struct RunOption {
  std::string_view name;  // the flag without "--" ("bucket-mb"); "workload" is the positional
  OptionType type;
  std::string_view help;                  // empty: hidden (set by the launcher or a suite, not typed)
  std::string_view suite_key;             // empty: not a suite key
  double min = 0, max = 0;                // integer and number ranges; both 0: none
  bool min_exclusive = false;             // the range excludes min (checked by the cli's apply_strategy)
  std::vector<std::string_view> choices;  // text options with a fixed set of values
  OptionScope scope = OptionScope::any;
  bool negated = false;  // a flag written --no-NAME on the command line (the suite key is positive)
  bool launch = false;   // the launcher's alone: not passed to the ranks
  Stored stored = Stored::none;
  std::string_view stored_key;                          // empty with Stored::none
  std::function<nlohmann::json(const RunConfig&)> get;  // null: unset (an optional)
  std::function<void(RunConfig&, const nlohmann::json&)> set;
  // The stored value where it differs from get (e.g. cross_barrier: asked for and meaningful).
  std::function<nlohmann::json(const RunConfig&)> stored_value = nullptr;

  bool has_range() const { return min != 0 || max != 0; }
  std::string flag() const { return "--" + std::string(negated ? "no-" : "") + std::string(name); }
};

// The table, in the order the help lists the options.
const std::vector<RunOption>& run_options();
// The option named `name` (as in RunOption::name); throws std::out_of_range for an unknown name.
const RunOption& run_option(std::string_view name);

// What a run resolved beside what it was asked for, for the stored config: the batch and the
// threads used, the workload's units and preset table, and for a distributed run the topology
// ("ranks", "global_batch", "strategy", ...; null for a single process).
struct StoredFacts {
  int64_t batch = 0;
  int64_t threads = 0;
  nlohmann::json units = nlohmann::json::object();
  nlohmann::json preset_table = nlohmann::json::object();
  nlohmann::json distributed;  // null: not distributed
};
// "R/N" (0 <= R < N): the shard a one-process run reads (RunConfig::shard); nullopt for anything else.
std::optional<std::pair<int, int>> parse_shard(std::string_view text);

// The run's stored config (config_json): the stored options, the facts and the suite tag.
nlohmann::json stored_config(const RunConfig& config, const StoredFacts& facts);

// The ranks' configuration: every option but the launcher's, plus the command line and the
// suite tag, as one document. A rank rebuilds its RunConfig from it instead of re-parsing flags.
nlohmann::json rank_document(const RunConfig& config);
RunConfig config_from_document(const nlohmann::json& document);  // throws std::invalid_argument
// The document as one command-line word (hex of its JSON): nothing an rsh agent or mpirun
// quotes, splits or expands.
std::string encode_document(const nlohmann::json& document);
nlohmann::json decode_document(std::string_view word);  // throws std::invalid_argument

}  // namespace ts::session
