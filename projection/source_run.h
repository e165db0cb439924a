#pragma once
// What a projection reads from a stored one-rank run: each timed iteration as the phases the
// training thread ran, in order, with every gradient's readiness in its backward (the loop's
// "gradient ready" markers), and the gradients' sizes per group (the `gradients` table).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "store/reader.h"

namespace ts::projection {

struct SourcePhase {
  std::string name;                  // data, forward, backward, optimizer
  int64_t start_ns = 0, end_ns = 0;  // from the iteration's start
  int group = -1;                    // a backward: the gradient group its markers belong to
  // A backward: (slot, ns after the phase's start) of each gradient that became final in it.
  std::vector<std::pair<int, int64_t>> ready;
  // A forward (read with_forward_uses): (flat parameter index, SourceRun::flat) with the ns after the
  // phase's start at which its layer's first op began: when a parameter server's worker needs it.
  std::vector<std::pair<int, int64_t>> first_use;
  int64_t duration() const { return end_ns - start_ns; }
};

// One update of an actor-learner (a3c), on the learner's own thread: from its acting phase (the
// read of the parameters and the rollout) through its forward and backward to its optimizer phase's
// end, in which the local optimizer's step (its *_step ops) is what a parameter server runs instead.
struct SourceUpdate {
  int learner = 0;                   // its thread, numbered in the order the learners first act
  int64_t start_ns = 0, end_ns = 0;  // from the iteration's start
  int64_t step_ns = 0;               // the local step within it
};

struct SourceIteration {
  int64_t index = 0;
  int64_t span_ns = 0;
  int64_t samples = 0;
  int64_t tokens = 0;                 // sequence workloads (the iteration's `tokens` metric); 0: none
  std::vector<SourcePhase> phases;    // by start; a learner run's are its updates instead
  std::vector<SourceUpdate> updates;  // an actor-learner run's, by start
};

struct SourceGroup {
  std::vector<std::string> names;  // by slot
  std::vector<int64_t> bytes;      // by slot
  // The order the group's gradients became final in its first backward (warm-up included), as
  // data parallelism rebuilds its buckets by (DDP's arrival order); slots never seen follow in
  // reverse registration order.
  std::vector<int> arrival;
  // Its step clips the gradients by their global norm (metric gradient_clip_norm.G): every one
  // must be final first, so a parameter server's worker pushes them after backward.
  bool clipped = false;
  int64_t total_bytes() const;
};

struct SourceRun {
  store::RunRow run;
  std::vector<SourceGroup> groups;
  std::vector<SourceIteration> iterations;  // the timed ones, by index
  // The rate of the run's memory-bound ops (roofline: their bytes over their time), what copying a
  // bucket's gradients in and out is assumed to run at; 0 when the run has no roofline.
  double memory_gbps = 0;
  // Actor-learner threads (a3c; its run's `learners` metric), each taking updates as it is free,
  // with every gradient group pushed whole after each; 0: one training thread's phases.
  int learners = 0;
  // The data it read: rank `shard_rank` of `shard_ranks` (`run --shard R/N`), or all of it (1).
  int shard_rank = 0, shard_ranks = 1;
  // Parameters numbered across groups: group g's slot s is group_offset[g] + s.
  std::vector<int> group_offset;
  int flat(int group, int slot) const { return group_offset[static_cast<size_t>(group)] + slot; }
  int parameter_count() const;
};

// Reads run `run_id` of `reader`. Throws std::invalid_argument naming what is missing: the run,
// completion, one rank, trainscope's own engine, a trace, the gradients and their markers (runs
// recorded before schema v15 have neither: run it again), an actor-learner run's updates.
// With `with_forward_uses`, each forward also gets its parameters' first uses (reads the run's ops).
SourceRun read_source(store::Reader& reader, int64_t run_id, bool with_forward_uses = false);

// The median of the source's timed iteration spans, ns.
double median_span_ns(const SourceRun& source);

}  // namespace ts::projection
