#pragma once
// The runs of one database as the runs table lists them: read once per open or refresh, off the
// GUI thread (store::Reader; the viewer has no schema of its own).
#include <QString>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "store/records.h"

namespace ts::viewer {

struct RunListEntry {
  QString db;  // the file, as the user opened it
  store::RunRow run;
  QString status;  // completed, failed, interrupted, running, lost (its writer is gone), running?
  // Rank 0's headline rate: sustained, in the workload's unit (runs stored before it had one: the
  // median samples/s; a run cut short: the median of the iterations it kept).
  std::optional<double> throughput;
  QString throughput_unit = QStringLiteral("samples/s");
  bool sustained = false;  // false: the median per iteration (labelled so in the table)
};

// Every run in `db` (ordered by id). Throws store::StoreError (missing, foreign, newer, corrupt).
std::vector<RunListEntry> list_runs(const std::filesystem::path& db);

}  // namespace ts::viewer
