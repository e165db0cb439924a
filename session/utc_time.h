#pragma once
// The wall-clock time as the store keeps it: ISO 8601 UTC, e.g. 2026-11-22T04:30:00Z.
#include <ctime>
#include <string>

namespace ts::session {

inline std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace ts::session
