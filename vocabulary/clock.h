#pragma once
// The one clock of trainscope: steady_clock since its epoch, in nanoseconds. Events, memory
// changes, samples and CUPTI's records all take their time from here, so they share one axis.
// Each host's steady clock has an epoch of its own (its boot): ranks on different hosts are
// aligned to rank 0's clock by measurement (distributed/clock_sync.h), never assumed equal.
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace ts::vocabulary {

// For tests of that alignment: TS_CLOCK_SKEW_NS (a signed integer) moves this process's clock by
// that much, as a host booted at another time would be; read once. Unset, malformed or out of
// range: 0.
inline int64_t injected_clock_skew_ns() {
  static const int64_t skew = [] {
    const char* text = std::getenv("TS_CLOCK_SKEW_NS");
    if (text == nullptr || *text == '\0') return int64_t{0};
    const int callers_errno = errno;  // the first now_ns() may come between a failed call and its errno check
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text, &end, 10);
    const bool whole = end != nullptr && *end == '\0' && errno == 0;
    errno = callers_errno;
    return whole ? static_cast<int64_t>(v) : int64_t{0};
  }();
  return skew;
}

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
             .count() +
         injected_clock_skew_ns();
}

}  // namespace ts::vocabulary
