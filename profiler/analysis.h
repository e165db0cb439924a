#pragma once
// Pure analyses over drained events: per-iteration phase times, per-layer forward/backward
// time, an op summary (like `nsys stats`), and the interval algebra of the time breakdown
// (docs/formulas.md). Nothing here reads the tracer except through a name lookup.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profiler/event.h"

namespace ts::profiler {

class Tracer;

// Resolves an interned id to its string (Tracer::str, or a table read back from the store).
using NameLookup = std::function<std::string_view(StringId)>;
// Whether an iteration's events count (the CLI excludes warm-up iterations).
using IterationFilter = std::function<bool(int32_t)>;

NameLookup lookup_in(const Tracer& tracer);
// Counts every iteration.
bool all_iterations(int32_t iteration);

// One iteration: the span of its `iteration` event and the time of the phase events stamped
// with its index, per phase name. A phase that repeats (wgan's critic steps) adds up.
// other_ns = span - |union of all phase events clipped to the span| (never negative).
struct IterationPhases {
  int32_t index = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t data_ns = 0;
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
  int64_t optimizer_ns = 0;
  int64_t other_ns = 0;
  int64_t span_ns() const { return end_ns - start_ns; }
};

// Sorted by index; iterations without an `iteration` event are left out. Phase events with
// names other than data/forward/backward/optimizer count as `other`. A phase nested in another
// on the same thread (cross-barrier's optimizer updates inside the next forward) counts for
// itself and not for its parent: each phase's time is its own.
std::vector<IterationPhases> phase_times(std::span<const Event> events, const NameLookup& lookup);
std::vector<IterationPhases> phase_times(std::span<const Event> events, const Tracer& tracer);

// Per layer: time of the OUTERMOST op events of that layer (an op nested in another op of
// the same thread is part of its parent's time), split by pass, over counted iterations.
struct LayerTime {
  StringId layer = 0;
  std::string name;
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
  int64_t other_ns = 0;          // outermost ops with Pass::none (e.g. under no-grad evaluation)
  int64_t calls = 0;             // outermost op events
  std::vector<std::string> ops;  // distinct names of those op events, sorted
  // The median over the counted iterations of the layer's forward + backward time in each (0
  // where it ran nothing): what a typical iteration spends there, which a few preempted calls
  // cannot inflate as they inflate the total. Rankings use it (docs/formulas.md).
  int64_t median_per_iteration_ns = 0;
  std::vector<int64_t> per_iteration_ns;  // that time in each counted iteration, in order (0: none)
};

// In order of each layer's first op event (model order). Ops with layer 0 are left out.
std::vector<LayerTime> layer_times(std::span<const Event> events, const NameLookup& lookup,
                                   const IterationFilter& counted = all_iterations);

// The op events as trees, one per outermost op of a thread: ordered per thread by (start asc,
// end desc), each with its direct parent (the innermost op event of the same thread that
// contains it; -1 for an outermost one), its root (the outermost op event containing it, itself
// for an outermost one) and its self time (its duration minus that of the op events directly
// nested in it, never negative). parent and root index the returned vector.
struct OpNode {
  size_t event;  // index into the events
  std::ptrdiff_t parent;
  std::ptrdiff_t root;
  int64_t self_ns;
};
std::vector<OpNode> op_tree(std::span<const Event> events);

// Per op name, over op events of counted iterations: statistics of SELF time (inclusive time
// minus the inclusive time of the op events directly nested in it on the same thread), so the
// totals add up to the op time without double counting; and the inclusive total beside it.
struct OpStat {
  std::string name;
  int64_t count = 0;
  int64_t total_ns = 0;
  // The op events' own durations, what they ran included (an op nested in one of the same
  // name counts in both, as profilers' "total" columns do). Kernels: their total_ns.
  int64_t inclusive_ns = 0;
  double mean_ns = 0;
  int64_t median_ns = 0;  // mean of the two middle values when count is even
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  // op_summary only: the median over the counted iterations of the op's self time in each (0 in
  // an iteration where it did not run); -1 where not computed (the GPU kernel summary).
  int64_t median_per_iteration_ns = -1;
  // op_summary only: the self time in each counted iteration, in iteration order (0 where it
  // did not run): the samples a comparison tests an op's change on (docs/formulas.md, "Culprits").
  std::vector<int64_t> per_iteration_ns;
};

// The median over `iterations` of each one's value in `per_iteration` (0 where absent); 0 for no
// iteration. The even case takes the mean of the two middle values (rounded down).
int64_t median_over_iterations(const std::map<int32_t, int64_t>& per_iteration, const std::vector<int32_t>& iterations);
// The value of each of `iterations` in `per_iteration`, in their order (0 where absent).
std::vector<int64_t> values_over_iterations(const std::map<int32_t, int64_t>& per_iteration,
                                            const std::vector<int32_t>& iterations);

// Sorted by total_ns descending (ties by name).
std::vector<OpStat> op_summary(std::span<const Event> events, const NameLookup& lookup,
                               const IterationFilter& counted = all_iterations);

// The statistics of each name's durations, sorted as op_summary's (names without any left out);
// shared by the op summary and the GPU kernel summary.
std::vector<OpStat> duration_stats(std::unordered_map<StringId, std::vector<int64_t>> by_name,
                                   const NameLookup& lookup);

// ---- interval algebra -------------------------------------------------------------------

struct Interval {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  friend bool operator==(const Interval&, const Interval&) = default;
};

// Sorted, disjoint, non-empty intervals; touching or overlapping ones are joined, empty or
// reversed ones dropped.
std::vector<Interval> merge(std::vector<Interval> intervals);
// |U intervals|.
int64_t union_length(std::vector<Interval> intervals);
// |U a  n  U b|.
int64_t intersection_length(std::vector<Interval> a, std::vector<Interval> b);
// Intervals clipped to [start, end); the ones outside dropped.
std::vector<Interval> clip(std::span<const Interval> intervals, int64_t start_ns, int64_t end_ns);

// docs/design.md's time breakdown over [span_start, span_end), inputs clipped to the span:
// compute = |U compute|, comm = |U comm|, overlap = |U compute n U comm|,
// exposed_comm = comm - overlap, overlap_fraction = overlap / comm (0 when comm = 0),
// idle = span - |U (compute u comm)|.
struct Breakdown {
  int64_t span_ns = 0;
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  int64_t overlap_ns = 0;
  int64_t exposed_comm_ns = 0;
  double overlap_fraction = 0;
  int64_t idle_ns = 0;
};

Breakdown breakdown(std::span<const Interval> compute, std::span<const Interval> comm, int64_t span_start_ns,
                    int64_t span_end_ns);

// U a minus U b: the parts of a's intervals that no interval of b covers, merged.
std::vector<Interval> subtract(std::vector<Interval> a, std::vector<Interval> b);

// The communication breakdown of one rank's iteration from its CPU events (docs/formulas.md,
// "Communication breakdown"): compute = the phases' time on the training threads minus the
// time they waited for communication (`wait` events), comm = the collectives (`comm` events,
// on the communication thread), then breakdown() over the iteration's span. wait_ns: |U wait|,
// the wait for the gradients at the end of backward; wait_by_name: |U wait| per wait's name (a
// parameter-server worker's "pull wait" and "push wait").
struct IterationCommBreakdown {
  int32_t iteration = 0;
  int64_t start_ns = 0, end_ns = 0;
  Breakdown time;
  int64_t wait_ns = 0;
  std::map<StringId, int64_t> wait_by_name;
};
// Sorted by iteration; iterations without an `iteration` event are left out.
std::vector<IterationCommBreakdown> comm_breakdown(std::span<const Event> events);

}  // namespace ts::profiler
