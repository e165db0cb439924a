#pragma once
// `trainscope list`: workloads, presets and parameter counts (WorkloadSpec::parameter_count: built
// on the meta device, which allocates nothing, so the full presets are counted on any machine).
#include <string>

#include "nlohmann/json.hpp"

namespace ts::cli {

nlohmann::json list_workloads_json();
std::string format_workload_list();

}  // namespace ts::cli
