// The GPU trace checks on hand-made traces, each with activities that pass and activities that
// fail, whose answers are worked out by hand: kernels before their launch, device work outside the
// iteration that launched it, CUPTI's iteration windows against CUDA-event times.
#include <gtest/gtest.h>

#include <vector>

#include "profiler/trace_checks.h"

using namespace ts::profiler;

namespace {

GpuActivity act(GpuKind kind, int64_t start, int64_t end, int32_t iteration = -1, uint32_t correlation = 0) {
  GpuActivity a;
  a.kind = kind;
  a.start_ns = start;
  a.end_ns = end;
  a.iteration = iteration;
  a.correlation = correlation;
  return a;
}

}  // namespace

TEST(TraceChecks, DeviceWorkThatStartsBeforeItsLaunchIsCounted) {
  const std::vector<GpuActivity> trace = {
      act(GpuKind::api, 100, 130, -1, 5), act(GpuKind::kernel, 150, 400, -1, 5),  // after its call: fine
      act(GpuKind::api, 200, 220, -1, 6), act(GpuKind::memcpy, 190, 300, -1, 6),  // before it: fails
      // A runtime call and the driver call inside it, one correlation id: the earlier one counts.
      act(GpuKind::api, 500, 560, -1, 7), act(GpuKind::api, 520, 540, -1, 7), act(GpuKind::memset, 510, 600, -1, 7),
      act(GpuKind::comm, 10, 20, -1, 8),  // its call is not in the trace: not checked
      act(GpuKind::sync, 0, 50, -1, 5),   // no device time: not checked
  };
  const CheckCount c = starts_before_launch(trace);
  EXPECT_EQ(c.checked, 3U);
  EXPECT_EQ(c.failed, 1U);
  EXPECT_DOUBLE_EQ(c.fraction(), 1.0 / 3.0);
}

TEST(TraceChecks, OneClockGivesNoneBeforeItsLaunch) {
  const std::vector<GpuActivity> trace = {act(GpuKind::api, 100, 130, -1, 5), act(GpuKind::kernel, 100, 400, -1, 5)};
  const CheckCount c = starts_before_launch(trace);
  EXPECT_EQ(c.checked, 1U);
  EXPECT_EQ(c.failed, 0U);
  EXPECT_EQ(starts_before_launch({}).fraction(), 0.0);  // nothing checked: nothing failed
}

TEST(TraceChecks, DeviceWorkOutsideTheIterationThatLaunchedItIsCounted) {
  const std::vector<IterationWindow> windows = {{0, 0, 1000}, {1, 1000, 2000}};
  const std::vector<GpuActivity> trace = {
      act(GpuKind::kernel, 100, 200, 0),    act(GpuKind::kernel, 900, 1100, 0),  // runs past its iteration's end: fails
      act(GpuKind::memset, 999, 1500, 1),                                        // starts before its iteration: fails
      act(GpuKind::memcpy, 1000, 2000, 1),                                       // the window's bounds belong to it
      act(GpuKind::kernel, 5000, 6000, 2),   // an iteration without a window: not checked
      act(GpuKind::kernel, 5000, 6000, -1),  // outside every iteration: not checked
      act(GpuKind::api, 5000, 6000, 0),      // not device work: not checked
  };
  const CheckCount c = outside_iteration(trace, windows);
  EXPECT_EQ(c.checked, 4U);
  EXPECT_EQ(c.failed, 2U);
  EXPECT_DOUBLE_EQ(c.fraction(), 0.5);
}

TEST(TraceChecks, CuptiWindowsAgainstEventTimes) {
  const std::vector<IterationWindow> windows = {
      {0, 0, 900, 100},       // warm-up: not counted
      {1, 1000, 1900, 400},   // last device work ends at 1400: window 400, difference 0
      {2, 2000, 2900, 500},   // ends at 2550: window 550, difference 0.1
      {3, 3000, 3900, 1000},  // ends at 3800: window 800, difference 0.2 (CUPTI's shorter)
      {4, 4000, 4900, -1},    // no event time: skipped
      {5, 5000, 5900, 300},   // no device work: skipped
  };
  const std::vector<GpuActivity> trace = {
      act(GpuKind::kernel, 10, 95, 0),     act(GpuKind::kernel, 1010, 1200, 1), act(GpuKind::memcpy, 1200, 1400, 1),
      act(GpuKind::kernel, 2010, 2550, 2), act(GpuKind::api, 2000, 2800, 2),  // host side: not the window's end
      act(GpuKind::memset, 3100, 3200, 3), act(GpuKind::kernel, 3300, 3800, 3), act(GpuKind::kernel, 4010, 4500, 4),
  };
  const auto counted = [](int32_t i) { return i >= 1; };
  const EventTimeDifference d = event_time_difference(trace, windows, counted);
  EXPECT_EQ(d.iterations, 3U);
  EXPECT_NEAR(d.max, 0.2, 1e-12);
  EXPECT_NEAR(d.median, 0.1, 1e-12);

  // An even count: the mean of the middle two.
  const std::vector<IterationWindow> two = {windows[1], windows[2]};
  const EventTimeDifference e = event_time_difference(trace, two, counted);
  EXPECT_EQ(e.iterations, 2U);
  EXPECT_NEAR(e.max, 0.1, 1e-12);
  EXPECT_NEAR(e.median, 0.05, 1e-12);

  // The warm-up iteration counts when the filter says so: |95 - 100| / 100.
  const std::vector<IterationWindow> warmup = {windows[0]};
  EXPECT_NEAR(event_time_difference(trace, warmup).max, 0.05, 1e-12);
}

TEST(TraceChecks, NoEventTimesNothingCompared) {
  const std::vector<IterationWindow> windows = {{0, 0, 900}, {1, 1000, 1900}};
  const std::vector<GpuActivity> trace = {act(GpuKind::kernel, 10, 500, 0), act(GpuKind::kernel, 1010, 1500, 1)};
  const EventTimeDifference d = event_time_difference(trace, windows);
  EXPECT_EQ(d.iterations, 0U);
  EXPECT_EQ(d.max, 0.0);
  EXPECT_EQ(d.median, 0.0);
}
