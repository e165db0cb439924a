#include "viewer/models/run_list.h"

#include "reports/run_digest.h"
#include "store/liveness.h"
#include "store/reader.h"

namespace ts::viewer {

std::vector<RunListEntry> list_runs(const std::filesystem::path& db) {
  store::Reader reader(db);
  std::vector<RunListEntry> out;
  for (auto& run : reader.runs()) {
    RunListEntry e;
    e.db = QString::fromStdString(db.string());
    e.status = QString::fromStdString(store::status_label(run));
    // The digest's listed rate, as `runs` prints it; a run cut short: the median of what it kept.
    if (const auto listed =
            reports::read_run_figures(reader, run.id, reports::KeptIterations::when_not_stored).listed()) {
      e.throughput = listed->rate.value;
      e.throughput_unit = QString::fromStdString(listed->rate.unit);
      e.sustained = listed->sustained;
    }
    e.run = std::move(run);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace ts::viewer
