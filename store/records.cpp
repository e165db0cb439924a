#include "store/records.h"

#include <charconv>

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

std::string encode_series(const std::vector<int64_t>& values) {
  std::string out;
  out.reserve(values.size() * 8);
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out;
}

std::vector<int64_t> decode_series(std::string_view text) {
  std::vector<int64_t> out;
  const char* p = text.data();
  const char* const end = text.data() + text.size();
  while (p < end) {
    int64_t v = 0;
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || (next != end && *next != ',')) return {};
    out.push_back(v);
    if (next == end) break;
    p = next + 1;
    if (p == end) return {};  // a trailing comma
  }
  return out;
}

}  // namespace ts::store
