#pragma once
// Projections in the store: a projection is a run of its own (framework "projection": its
// iterations, phases, calls and per-rank breakdown in the same tables as a measured run's) and a
// `projections` row linking it to its inputs. A multi-rank run that has a matching one-rank run
// and collectives sweep in the same db gets its own projection with the error against what it
// measured: the error ledger (docs/projection.md).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "projection/simulate.h"
#include "store/reader.h"
#include "store/writer.h"

namespace ts::projection {

// What a projection was made from, besides the source run.
struct Inputs {
  int64_t sweep_run = 0;     // 0: a nominal link
  int64_t measured_run = 0;  // 0: none
  double measured_ns = -1;   // the measured run's median iteration (rank 0), -1: none
  std::string link;          // the link as the user named it ("1gbit", "sweep 12")
  std::string command_line;
};

// Stores `p` (projected from `source`) and returns the projection's run id.
int64_t store_projection(store::Writer& writer, const SourceRun& source, const Projection& p, const Inputs& in);

// The median of rank 0's timed iteration spans of a stored run (ns); nullopt without any.
std::optional<double> median_iteration_ns(store::Reader& reader, int64_t run);

// The knobs a measured multi-rank run ran with, or why it cannot be projected (what the model does
// not cover: several or dedicated servers, a parameter server's priority, GPUs).
struct MeasuredKnobs {
  std::optional<Knobs> knobs;
  std::string why_not;
};
MeasuredKnobs knobs_of(store::Reader& reader, const store::RunRow& measured);

// The newest completed one-rank run of the same workload, preset, device, per-rank batch and
// threads, traced and with its gradients, before `measured`; and the newest collectives sweep
// with all-reduce rows over the same hosts (the environment's rank_hosts) before it.
std::optional<int64_t> find_source(store::Reader& reader, const store::RunRow& measured);
std::optional<int64_t> find_sweep(store::Reader& reader, const store::RunRow& measured);

// A multi-rank run's own projection: found inputs, projected, stored with its error. The result
// (the ledger's row) or why there is none.
struct LedgerResult {
  std::optional<store::ProjectionRow> row;
  std::string why_not;
};
LedgerResult project_measured(const std::filesystem::path& db, int64_t measured_run, const std::string& command_line);

}  // namespace ts::projection
