#pragma once
// What `trainscope run` was asked to do, after parsing and validation.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace ts::cli {

// Bad input: the cli prints the message and exits with code 2, having written nothing.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunConfig {
  std::string workload;
  std::string preset = "tiny";
  std::string device = "cpu";
  std::string data = "synthetic";
  std::optional<int64_t> batch;   // unset: the preset's default
  std::optional<int64_t> learners;   // actor-learner threads (a3c); unset: the preset's
  int64_t iterations = 20;
  int64_t warmup = 3;
  int64_t threads = 0;      // 0: all cores
  uint64_t seed = 1;
  int64_t eval_batches = 2;
  bool trace = true;
  bool json = false;
  std::filesystem::path db = "results/trainscope.db";
  std::string command_line;
};

// Checks everything that can be checked before anything is written; throws UsageError.
void validate(const RunConfig& config);

}  // namespace ts::cli
