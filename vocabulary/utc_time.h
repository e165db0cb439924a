#pragma once
// The wall-clock time as the store keeps it: ISO 8601 UTC, e.g. 2026-11-22T04:30:00Z.
#include <ctime>
#include <string>

namespace ts::vocabulary {

inline std::string iso_utc(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

inline std::string utc_now() { return iso_utc(std::time(nullptr)); }

}  // namespace ts::vocabulary
