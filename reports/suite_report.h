#pragma once
// `trainscope report DB [selection]`: a TBD-style report of the runs a suite made. Runs are
// grouped by what they measure (RunKey; repeats pooled): throughput and its spread, time per
// phase, by op class, the top ops and layers, the compute/comm/overlap/idle breakdown of
// distributed runs, memory at peak by category beside TBD's five classes, per-layer activation
// memory, the environment, and the scaling and throughput-versus-batch curves where a suite has
// several rank counts or batch sizes. Runs that failed, were interrupted or died are listed with
// what they kept; they never stop the report.
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "reports/document.h"
#include "reports/run_digest.h"

namespace ts::reports {

// `source` names what was selected (the db and the selection), for the title.
Document suite_report_document(const std::vector<RunDigest>& runs, const std::string& source);
nlohmann::json suite_report_json(const std::vector<RunDigest>& runs, const std::string& source);

}  // namespace ts::reports
