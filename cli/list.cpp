#include "cli/list.h"

#include "cli/summary.h"
#include "fmt/format.h"
#include "workloads/workload.h"

namespace ts::cli {

nlohmann::json list_workloads_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& spec : ts::workloads::registry()) {
    nlohmann::json presets = nlohmann::json::array();
    for (const auto& p : spec.presets) {
      nlohmann::json table = nlohmann::json::object();
      for (const auto& [k, v] : p.table) table[k] = v;
      presets.push_back({{"name", p.name},
                         {"summary", p.summary},
                         {"default_batch", p.default_batch},
                         {"batch_unit", spec.units.batch},
                         {"parameters", spec.parameter_count(p.name)},
                         {"table", table}});
    }
    out.push_back({{"name", spec.name},
                   {"domain", spec.domain},
                   {"description", spec.description},
                   {"throughput",
                    {{"samples", spec.units.samples},
                     {"tokens", spec.units.tokens},
                     {"headline", spec.units.tokens_headline ? spec.units.tokens : spec.units.samples}}},
                   {"presets", presets}});
  }
  return out;
}

std::string format_workload_list() {
  std::string s;
  for (const auto& w : list_workloads_json()) {
    s += fmt::format("{}  ({}; throughput in {}/s)\n  {}\n", w["name"].get<std::string>(),
                     w["domain"].get<std::string>(), w["throughput"]["headline"].get<std::string>(),
                     w["description"].get<std::string>());
    for (const auto& p : w["presets"]) {
      const int64_t default_batch = p["default_batch"].get<int64_t>();
      const std::string batch =
          fmt::format("{} {}", default_batch, units_for(default_batch, p["batch_unit"].get<std::string>()));
      s += fmt::format("    {:<6} {:>12} parameters  batch {:<19}  {}\n", p["name"].get<std::string>(),
                       with_commas(p["parameters"].get<int64_t>()), batch, p["summary"].get<std::string>());
    }
  }
  return s;
}

}  // namespace ts::cli
