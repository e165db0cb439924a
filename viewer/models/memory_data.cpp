#include "viewer/models/memory_data.h"

#include <set>
#include <string>

#include "store/error.h"
#include "store/reader.h"

namespace ts::viewer {

MemoryData load_memory_data(const QString& db, int64_t run_id, int64_t rank) {
  const std::string path = db.toStdString();
  store::Reader reader(path);
  if (!reader.run(run_id)) {
    throw store::StoreError(store::StoreError::Kind::not_found, "run " + std::to_string(run_id) + " is not in " + path);
  }
  std::set<int64_t> ranks;
  for (const auto& p : reader.memory_peak(run_id, std::nullopt)) ranks.insert(p.rank);
  // A run that never reached its final write has a streamed timeline but no peak.
  if (ranks.empty()) {
    for (const int64_t k : reader.ranks_present(run_id)) ranks.insert(k);
  }
  if (ranks.empty()) ranks.insert(0);
  MemoryData d;
  d.ranks.assign(ranks.begin(), ranks.end());
  d.rank = rank >= 0 ? rank : d.ranks.front();
  d.timeline = reader.memory_timeline(run_id, d.rank);
  d.peak = reader.memory_peak(run_id, d.rank);
  for (const auto& m : reader.metrics(run_id, d.rank)) {
    if (m.iteration >= 0) continue;
    if (m.name == "memory_changes_stored") d.changes_stored = static_cast<int64_t>(m.value);
    if (m.name == "memory_changes_dropped") d.changes_dropped = static_cast<int64_t>(m.value);
  }
  return d;
}

}  // namespace ts::viewer
