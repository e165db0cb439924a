#pragma once
// Interference (issue 41, item 3): compute slowed down by communication running beside it. On a
// CPU run the data-parallel communication thread polls MPI while the training thread computes,
// and takes cores, caches and memory bandwidth from it; the time breakdown counts the slower ops
// as compute. Here each op instance of a rank's timed iterations is set against the same op's
// instances that ran with no communication beside them (docs/formulas.md, "Interference"):
//
//   reference(op)  = the median self time of its undisturbed instances (none: no estimate); an op
//                    is its name, layer, pass and which call of those in its iteration
//   excess(i)      = min(max(0, self(i) - reference), time(i) under communication)
//   jitter(i)      = min(mean over undisturbed j of max(0, self(j) - reference), time(i) under comm)
//
// interference = the sum of excess over the disturbed instances that have a reference; jitter,
// beside it, is what the same sum gives instances that nothing disturbed (timing noise alone);
// the disturbed time of ops without an undisturbed instance is `unmeasured`, never counted as
// none. Communication beside an op: a collective on another thread of the same machine, the rank's
// own communication thread or another rank's on its host (they share its cores). Pure: tests
// feed it rows; read_interference reads a stored run's.
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "reports/rank_clocks.h"
#include "store/reader.h"
#include "store/records.h"

namespace ts::reports {

// A reference resting on fewer undisturbed instances than this may be noise; the views say how
// much of the measured time rests on such references.
inline constexpr int64_t kThinReference = 5;

// The store's ids of the event kinds the analysis reads (store::Reader::string_id); -1: none stored.
struct EventKindIds {
  int64_t op = -1, comm = -1, phase = -1;
};

// One op identity on a rank: name, layer and pass as the events carry them (the store's string
// ids), and which call of those it is in its iteration (0 the first; the same call site, so the
// same shapes, from one iteration to the next; `calls`: the most in one iteration).
struct OpInterference {
  int64_t name = 0, layer = 0, pass = 0;
  int64_t call = 0, calls = 1;
  int64_t undisturbed = 0, disturbed = 0;  // instances
  int64_t reference_ns = -1;               // the undisturbed instances' median self time; -1: none
  int64_t disturbed_ns = 0;                // the disturbed instances' self time
  int64_t interference_ns = 0, jitter_ns = 0;
};

// One rank over the timed iterations; times are sums over them (ns).
struct RankInterference {
  int64_t rank = 0;
  int64_t op_ns = 0;          // self time of every counted op instance: the compute measured
  int64_t disturbed_ns = 0;   // of which instances under communication on another thread
  int64_t covered_ns = 0;     // of which instances whose op has a reference
  int64_t unmeasured_ns = 0;  // disturbed_ns - covered_ns
  int64_t interference_ns = 0, jitter_ns = 0;
  int64_t thin_ns = 0;  // of covered_ns: instances whose reference rests on fewer than kThinReference
  int64_t instances = 0, disturbed_instances = 0, covered_instances = 0, thin_instances = 0;
  std::vector<OpInterference> ops;  // identities with a disturbed instance: most interference first
  // covered_ns / disturbed_ns; unset when nothing was disturbed.
  std::optional<double> covered_share() const;
};

// A communication interval on rank 0's clock (reports/rank_clocks.h).
struct CommSpan {
  int64_t start_ns = 0, end_ns = 0;
};

// One rank's events (any order; only `kinds`' op, comm and phase events are read). Counted: op
// events of the iterations in `timed` on a thread with phase events (the training threads; a
// communication thread's helpers are not compute). Self time: an op's duration minus that of the
// op events directly nested in it on its thread; its time under communication likewise, against
// the union of the comm events of the rank's other threads and `others` (the other ranks' on the
// rank's machine, on rank 0's clock; the rank's own times are mapped onto it through `clocks`, its
// own where null or not measured). A collective on the op's own thread is not beside it. An
// instance with any time under communication is disturbed.
RankInterference rank_interference(std::span<const store::EventIdRow> events, const EventKindIds& kinds,
                                   const std::set<int64_t>& timed, int64_t rank = 0,
                                   std::span<const CommSpan> others = {}, const RankClocks* clocks = nullptr);

// Every rank's of a stored run (by rank), read rank by rank (Reader::event_ids). `rank_hosts`:
// each rank's host, as the run's config stores it; ranks on one host are beside each other (a
// rank beyond it, or without it: its own communication alone). Ranks without op events in the timed
// iterations are left out (untraced runs: empty).
std::vector<RankInterference> read_interference(store::Reader& reader, int64_t run, const std::set<int64_t>& timed,
                                                const RankClocks& clocks, const std::vector<std::string>& rank_hosts);

}  // namespace ts::reports
