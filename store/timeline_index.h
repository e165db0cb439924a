#pragma once
// Internal: the timeline's level of detail (schema v5, docs/viewer.md "Level of detail").
// Lanes are a rank's thread (events) or a GPU device's stream (activities); within a lane an
// event's depth is how many events enclose it. Time is cut into buckets: level 0 buckets are
// base_ns wide, each level 4x wider. A tile sums, per lane, depth, level and bucket, the events
// shorter than that level's bucket (their durations split at bucket edges, so totals are kept);
// events at least base_ns long are listed as spans by size class (class c: base*4^c <= duration
// < base*4^(c+1), the top class open-ended), so a window finds them with a bounded seek.
#include <cstdint>
#include <string_view>

#include "store/sqlite.h"

namespace ts::store::detail {

inline constexpr int kTimelineFanOut = 4;         // bucket width ratio between neighbouring levels
inline constexpr int64_t kTopLevelBuckets = 256;  // the coarsest level needs no more across a run
inline constexpr int kMaxTimelineLevels = 24;     // 4^24 buckets: more than any run needs

// What a reader needs to know of an index.
struct TimelineGeometry {
  int64_t origin_ns = 0, base_ns = 1;
  int levels = 1;
  int64_t bucket_ns(int level) const { return base_ns << (2 * level); }
};

// Builds run `run`'s index from the events and GPU activities of `source` into the timeline
// tables of `target` (the same connection at a run's final write; an in-memory database for a
// reader of a run that has none), replacing the run's rows there. The caller owns the transaction.
void build_timeline_index(Db& source, Db& target, int64_t run);

bool has_table(Db& db, std::string_view table);
bool has_column(Db& db, std::string_view table, std::string_view column);

// The timeline tables without foreign keys, for an in-memory index beside a read-only file.
void create_timeline_tables(Db& target);

}  // namespace ts::store::detail
