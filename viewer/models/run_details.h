#pragma once
// Everything the overview and the tables show of one run, read in one go off the GUI thread:
// the reports' digest (the same figures and statistics as `trainscope report` and `compare`), the
// op and kernel summaries and the layers.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "reports/run_digest.h"
#include "store/records.h"

namespace ts::viewer {

struct RunDetails {
  reports::RunDigest digest;
  std::vector<store::OpSummaryRow> ops;  // CPU ops and GPU kernels (device != "cpu"), self time
  std::vector<store::LayerRow> layers;   // model order (the window ranks them)
};

// Throws store::StoreError (missing, foreign, newer, corrupt db; a run that is not there).
RunDetails load_run_details(const std::filesystem::path& db, int64_t run_id);

}  // namespace ts::viewer
