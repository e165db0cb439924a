#pragma once
// What `trainscope run` was asked to do, after parsing and validation.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "session/run_config.h"
#include "session/run_options.h"

namespace ts::cli {

// Bad input: the cli prints the message and exits with code 2, having written nothing.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The run's config lives with the run session, which carries it out.
using session::RunConfig;

// The ranges are declared with each option (session/run_options.cpp) and checked by validate().
// A batch within range can still be too large for the machine: the engine's checked sizes and
// its out-of-memory error (naming the bytes and the tensor) end such a run as failed.

// CPU cores online on this machine (at least 1): the most --threads may ask for.
using session::online_cores;

// Checks everything that can be checked before anything is written; throws UsageError.
void validate(const RunConfig& config);

// Whether the run starts ranks through mpirun: several workers, hosts, or dedicated parameter
// servers (ranks of their own even beside a single worker).
bool launches_ranks(const RunConfig& config);

// The strategy options as written on the command line or in a suite entry: those given, with
// their values, before they are checked and set in a RunConfig.
struct StrategyInput {
  std::optional<std::string> strategy;  // "allreduce" | "ps"
  std::optional<int64_t> servers;
  std::optional<bool> dedicated_servers;  // --dedicated-servers: true
  std::optional<std::string> server_hosts;
  std::optional<std::string> ps_mode;
  std::optional<int64_t> staleness;
  std::optional<double> chunk_mb;
  // The all-reduce-only options given (--bucket-mb, ...; in a suite, their keys), in the form the
  // user wrote them, for the message that refuses them with --strategy ps.
  std::vector<std::string> allreduce_only;
};
// One option as written on the command line or in a suite: its declaration and its value (as
// the declaration's `set` takes it), after its type and, in a suite, its range were checked.
struct GivenOption {
  const session::RunOption* option;
  nlohmann::json value;
};
// Sets the options given on `config`, the same for the command line and a suite (`suite`: names
// options as keys): the strategy's through apply_strategy, with hosts and no nproc one rank per
// slot. UsageError on what a table entry cannot say (an option of the other strategy, ...).
void apply_options(const std::vector<GivenOption>& given, RunConfig& config, bool suite = false);
// Whether apply_strategy checks the option's value (the strategy and the parameter server's).
bool set_by_strategy(const session::RunOption& option);

// Checks `in` (UsageError naming the option and its value) and sets config.strategy and
// config.ps; --priority (config.data_parallel.priority, set before) also sets ps.priority under
// --strategy ps. `suite` names the options as a suite's keys ("key 'servers'") rather than flags.
void apply_strategy(const StrategyInput& in, RunConfig& config, bool suite = false);

// "--iters must be from 1 to 1000000000 (got 0)": UsageError unless min <= value <= max.
void check_range(std::string_view option, int64_t value, int64_t min, int64_t max, std::string_view note = "");
// The launch options every multi-rank command takes: --nproc in range (0 with hosts: one rank
// per slot), --hosts or --hostfile but not both, and not one of several srun tasks that srun gave no
// MPI rank (each would run alone). UsageError otherwise.
void validate_launch(int64_t nproc, const std::string& hosts, const std::filesystem::path& hostfile);
// "NAME=VALUE" (an --mca option, a suite's mca entry) as NAME and VALUE; empty when malformed.
std::optional<std::pair<std::string, std::string>> split_mca(std::string_view option);

// Parser checks for integer options (CLI11 transforms): empty when `text` is a whole decimal
// number that fits, which is then rewritten in plain form; otherwise why not. CLI11's own
// conversion clamps 99999999999999999999 to the type's largest value, wraps -1 to 2^64-1 for
// unsigned types and reads 010 as octal.
std::string check_int64_text(std::string& text);
std::string check_uint64_text(std::string& text);
// A run id (`show`, `export`): a whole decimal number from 1 to 2^63-1 (issue 39: 0x1 was read as
// hex and 99999999999999999999 as the largest id).
std::string check_run_id_text(std::string& text);
// UsageError unless `text` is valid UTF-8 (what trainscope stores is JSON text), naming `what`
// and showing the bytes that are not printable as \xNN.
void check_utf8(std::string_view text, std::string_view what);
// A count that may be 0 (`show --layers`): a whole decimal number from 0 to 2^63-1.
std::string check_count_text(std::string& text);

}  // namespace ts::cli
