#pragma once
// How a parameter server's receiving threads wait for a message (distributed/ps/wire.cpp): a few
// polls at once, then sleeps of 20, 40, ... up to 200 microseconds between polls; a projection of
// a parameter server (projection/) charges each message the wait this implies.
#include <cstdint>

namespace ts::vocabulary {

inline constexpr int kPsBusyPolls = 64;
inline constexpr int64_t kPsFirstSleepUs = 20, kPsMaxSleepUs = 200;

}  // namespace ts::vocabulary
