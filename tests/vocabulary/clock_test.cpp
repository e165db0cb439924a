#include "vocabulary/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace ts::vocabulary {
namespace {

// Timestamps order events across threads and layers: the clock never goes back, and it
// counts nanoseconds (a 2 ms sleep reads as at least 2e6).
TEST(Clock, MonotonicNanoseconds) {
  const int64_t a = now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int64_t b = now_ns();
  EXPECT_GT(a, 0);  // 0 means "no time" in GPU records (profiler/gpu_activity.h)
  EXPECT_GE(b - a, 2'000'000);
  EXPECT_LT(b - a, 2'000'000'000);  // not micro- or picoseconds by mistake
}

// The same axis as std::chrono::steady_clock, which the samplers also read.
TEST(Clock, IsTheSteadyClock) {
  const int64_t before =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const int64_t t = now_ns();
  const int64_t after =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  EXPECT_LE(before, t);
  EXPECT_LE(t, after);
}

}  // namespace
}  // namespace ts::vocabulary
