#pragma once
// What the suite report and the comparison need of one stored run, read once through store's
// Reader: its identity (the key that pairs runs across builds), its per-iteration samples (the
// statistics work on these, never on stored summaries alone), and its run-level figures.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "store/reader.h"
#include "store/records.h"

namespace ts::reports {

// Which of TBD's five memory classes (Weights, Gradients, Feature maps, Workspace, Dynamic) a
// stored category belongs to. The memory ledger owns that taxonomy, so the caller supplies it
// (reports read the store and nothing else); empty: no TBD columns.
using MemoryClassifier = std::function<std::string(std::string_view category)>;

// Runs that measure the same thing, in any db: what a comparison pairs and a report groups.
struct RunKey {
  std::string workload, preset, device;
  int64_t batch = 0, ranks = 1;
  auto operator<=>(const RunKey&) const = default;
  std::string label() const;   // "resnet50/tiny cpu batch 16 x2 ranks"
};

struct PhaseSamples { std::string phase; std::vector<double> ms; };   // one value per timed iteration

struct RankBreakdownMedians {
  int64_t rank = 0;
  double iteration_ms = 0, compute_ms = 0, comm_ms = 0, overlap_ms = 0, exposed_comm_ms = 0, idle_ms = 0;
};

struct OpTotal { std::string name; int64_t count = 0; double total_ms = 0; };
struct LayerTotal { std::string layer; double forward_ms = 0, backward_ms = 0; int64_t activation_bytes = 0, parameters = 0; };
struct MemoryCategory { std::string category, tbd_class; int64_t bytes = 0; };

struct RunDigest {
  std::filesystem::path db;
  store::RunRow run;
  RunKey key;
  std::string status;            // completed, failed, interrupted, running, lost, running?
  std::string suite;             // the suite that made it ("" when none), its entry and repeat
  int64_t suite_entry = 0, suite_repeat = 0;
  std::string unit = "samples/s";
  // Per timed iteration of rank 0 (the ranks step together): wall time and samples/s of one rank
  // (times ranks for the job's rate).
  std::vector<double> iteration_ms, throughput;
  std::vector<PhaseSamples> phases;       // data, forward, backward, optimizer, then a workload's own
  std::vector<double> exposed_comm_ms;    // per timed iteration, the largest over ranks (empty: one rank)
  std::vector<RankBreakdownMedians> breakdown;   // per rank (distributed runs)
  std::vector<OpTotal> ops;               // CPU ops by total time, largest first
  std::vector<LayerTotal> layers;         // model order
  std::vector<MemoryCategory> memory;     // at the peak, by category, non-zero ones
  int64_t peak_bytes = 0;
  std::vector<store::EnvEntry> environment;
  std::map<std::string, double> metrics;  // rank 0's whole-run metrics

  bool finished_ok() const { return status == "completed"; }
};

// Throws store::StoreError when the db cannot be read.
RunDigest digest_run(store::Reader& reader, const std::filesystem::path& db, const store::RunRow& run,
                     const MemoryClassifier& classify);

// The runs a selection names in one db. Each selector is a run id ("7"), a range ("3-9"), or a
// suite name (every run a suite of that name made); none: every run. Collectives benchmarks
// (no training) are left out. Throws std::invalid_argument naming a selector that matches nothing.
std::vector<RunDigest> select_runs(const std::filesystem::path& db, const std::vector<std::string>& selectors,
                                   const MemoryClassifier& classify);

}  // namespace ts::reports
