#pragma once
// The simulation: a one-rank run's iterations replayed as N ranks would run them, with the
// communication the strategy adds placed where it would run (docs/projection.md, "The model").
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "projection/link_model.h"
#include "projection/source_run.h"
#include "vocabulary/ps_mode.h"

namespace ts::projection {

enum class Strategy { allreduce, ps };
std::string_view to_string(Strategy s);

// What is projected: the ranks and the strategy's knobs, named and defaulted as `trainscope run`'s.
struct Knobs {
  Strategy strategy = Strategy::allreduce;
  int64_t ranks = 2;
  // all-reduce (docs/distributed.md): bucket size, overlap, DDP's arrival order or reverse
  // registration, priority (partitions, the front-most ready bucket first, agreed per bucket)
  double bucket_mb = 25;
  bool overlap = true;
  bool arrival_order = true;
  bool priority = false;
  double partition_mb = 4;
  // With priority: cross-barrier (ByteScheduler), as `run` takes it: the backward's end does not
  // wait; the next forward waits layer by layer for its parameters' buckets and updates them itself.
  // Taken only where the source's step can be cut per parameter (one gradient group, no global-norm
  // clipping); a projection's stored knobs say whether it was.
  bool cross_barrier = true;
  // The cores each rank has (its share of its machine). 0: the source's threads and one more, the
  // communication thread's own: communication then takes nothing from compute. Fewer (ranks
  // sharing a machine, as namespace hosts do) and the two share the cores while they overlap.
  double cores_per_rank = 0;
  // parameter server: one server shard on worker 0's host, chunks (keys) of chunk_mb, its mode
  // (vocabulary/ps_mode.h) and, bounded, how many pushes a worker may run ahead of the slowest
  double chunk_mb = 1;
  vocabulary::PsMode ps_mode = vocabulary::PsMode::sync;
  int64_t staleness = 0;
  bool ps_priority = false;
};
std::string knobs_json(const Knobs& k);
// Whether projecting with these knobs reads the source's forwards' first uses (read_source's
// with_forward_uses): a parameter server's forward waits for its layers' values, cross-barrier's
// for their updates.
bool needs_forward_uses(const Knobs& k);

struct ProjectedCall {
  int rank = 0;       // the rank whose communication it is (a PS push: its worker; a reply: the server's)
  std::string label;  // "bucket 0.3", "push fc.weight", ...
  // "copy into bucket", "all_reduce", "copy out of bucket", "priority negotiation"; a parameter
  // server's "push" (a worker's), "ps update" and "ps reply" (the server's rank's)
  std::string what;
  int64_t bytes = 0;
  double start_ns = 0, end_ns = 0;  // from the iteration's start
};

struct ProjectedPhase {
  std::string name;
  double start_ns = 0, end_ns = 0;
};

// One rank's projected iteration, its breakdown defined as a measured run's (docs/formulas.md,
// "Communication breakdown"): compute = the training thread's phases less its waits, comm = |U
// communication|, overlap = |compute n comm|, exposed = comm - overlap, idle = span - |compute u comm|.
struct ProjectedIteration {
  int64_t index = 0;  // the source's iteration
  int rank = 0;
  double start_ns = 0;  // on the projection's clock (iterations one after another)
  double span_ns = 0, compute_ns = 0, comm_ns = 0, overlap_ns = 0, exposed_ns = 0, idle_ns = 0;
  double wait_ns = 0;  // the training thread waiting for communication (gradient, pull or push waits)
  std::vector<ProjectedPhase> phases;
  std::vector<ProjectedCall> calls;
};

struct Projection {
  Knobs knobs;
  LinkModel link;
  std::vector<ProjectedIteration> iterations;  // by rank, then iteration
  std::vector<int64_t> bucket_bytes;           // all-reduce: every bucket of every group, in order; ps: every key
  std::vector<std::string> assumptions;        // what the model took for granted, said to the user
  double median_span_ns = 0;                   // rank 0's
  double median(double ProjectedIteration::*field, int rank = 0) const;
};

// Throws std::invalid_argument for knobs it cannot project (fewer than 2 ranks, sizes <= 0).
Projection project(const SourceRun& source, const LinkModel& link, const Knobs& knobs);

}  // namespace ts::projection
