#include "store/records.h"

namespace ts::store {

std::string_view to_string(RunStatus status) {
  switch (status) {
    case RunStatus::running: return "running";
    case RunStatus::completed: return "completed";
    case RunStatus::failed: return "failed";
    case RunStatus::interrupted: return "interrupted";
  }
  return "unknown";
}

std::optional<RunStatus> parse_run_status(std::string_view text) {
  for (RunStatus s : {RunStatus::running, RunStatus::completed, RunStatus::failed, RunStatus::interrupted})
    if (to_string(s) == text) return s;
  return std::nullopt;
}

}  // namespace ts::store
