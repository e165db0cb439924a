#pragma once
// What the memory view (viewer/memory_view.h) shows of one rank of a run, read from the store in
// one go off the GUI thread: its timeline by category, its peak, and whether its change log
// (owners) was stored.
#include <QString>

#include <cstdint>
#include <vector>

#include "store/records.h"

namespace ts::viewer {

// What the chart shows of one rank, read in one go: its timeline, its peak, and whether its
// change log (owners) was stored, and if so whether all of it.
struct MemoryData {
  std::vector<int64_t> ranks;  // ranks with memory data, ascending
  int64_t rank = 0;            // the one read
  std::vector<store::MemoryPoint> timeline;
  std::vector<store::MemoryPeakRow> peak;
  int64_t changes_stored = -1;  // -1: no change log for this rank (older runs, other ranks)
  int64_t changes_dropped = 0;
};

// Throws store::StoreError (missing, foreign, newer, corrupt db; a run that is not there).
// rank < 0: the first rank that has memory data.
MemoryData load_memory_data(const QString& db, int64_t run_id, int64_t rank);

// The peak as the chart marks it: memory_peak's time and total (the timeline's highest point
// for a run that never stored its peak).
struct PeakMarker {
  int64_t t_ns = 0;
  int64_t total_bytes = 0;
  bool from_timeline = false;
};

}  // namespace ts::viewer
