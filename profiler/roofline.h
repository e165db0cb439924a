#pragma once
// Where a step's time goes at the level a roofline speaks of (docs/formulas.md, "Roofline"): the
// ops' self time, FLOPs and bytes by work class (compute-bound, memory-bound, reorders, other
// ops), the data phase's time outside ops, and the framework's overhead (time in the step that
// no op's own work covers). Set beside the machine's measured SGEMM peak and copy bandwidth, it says how far
// each class is from what the machine can do.
#include <array>
#include <cstdint>
#include <span>

#include "profiler/analysis.h"
#include "profiler/event.h"

namespace ts::profiler {

struct WorkTotals {
  int64_t self_ns = 0;  // the ops' self time
  int64_t flops = 0;
  int64_t bytes = 0;
  int64_t calls = 0;  // op events
};

struct Roofline {
  // Thread time of the counted iterations: on every thread, the time its phases cover (data,
  // forward, backward, optimizer, and a workload's own, as a3c's acting and waiting), plus each
  // iteration's time outside any phase. One training thread: the sum of the iterations' spans.
  int64_t total_ns = 0;
  // Indexed by WorkClass; `none` holds the self time of ops that declared no work (autograd
  // nodes around their pieces), which is counted in the overhead.
  std::array<WorkTotals, kWorkClassCount> by_class{};
  int64_t data_ns = 0;      // in data phases, outside ops (making or loading the batch)
  int64_t overhead_ns = 0;  // total - work - data: between ops, in the loop, autograd's bookkeeping
  int64_t iterations = 0;   // counted iterations

  const WorkTotals& operator[](WorkClass c) const { return by_class[static_cast<size_t>(c)]; }
  // The self time of the ops that declared work (every class but none).
  int64_t work_ns() const;
};

// Over the counted iterations: ops count where they run inside a phase of their own thread
// (collectives' helper ops on a communication thread do not), each in the class it declared.
Roofline roofline(std::span<const Event> events, const NameLookup& lookup,
                  const IterationFilter& counted = all_iterations);

}  // namespace ts::profiler
