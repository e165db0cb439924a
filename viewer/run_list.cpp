#include "viewer/run_list.h"

#include "reports/statistics.h"
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
    bool headline = false;
    for (const auto& m : reader.metrics(run.id)) {
      if (m.iteration >= 0 || (m.name != "headline_throughput" && (m.name != "throughput_median" || headline))) continue;
      e.throughput = m.value;
      if (!m.unit.empty()) e.throughput_unit = QString::fromStdString(m.unit);
      headline = headline || m.name == "headline_throughput";
    }
    if (!e.throughput) {   // a run that never reached its final write: what it streamed
      std::vector<double> rates;
      for (const auto& it : reader.iterations(run.id)) {
        const double secs = static_cast<double>(it.end_ns - it.start_ns) * 1e-9;
        if (!it.warmup && secs > 0) rates.push_back(static_cast<double>(it.samples) / secs);
      }
      if (!rates.empty()) e.throughput = reports::median(std::move(rates));
    }
    e.run = std::move(run);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace ts::viewer
