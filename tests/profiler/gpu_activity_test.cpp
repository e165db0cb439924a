// Which CUPTI records the tracer leaves out for want of a time (is_incomplete): what a forced
// flush returns for unfinished work (start or end 0), what CUPTI writes when it could not time a
// kernel, an end before the start; every complete record of each kind is kept.
#include <gtest/gtest.h>

#include <string>

#include "profiler/gpu_activity.h"

using namespace ts::profiler;

namespace {

GpuActivity act(GpuKind kind, int64_t start, int64_t end) {
  GpuActivity a;
  a.kind = kind;
  a.start_ns = start;
  a.end_ns = end;
  return a;
}

constexpr GpuKind kIntervalKinds[] = {GpuKind::kernel, GpuKind::comm, GpuKind::memcpy,  GpuKind::memset,
                                      GpuKind::sync,   GpuKind::api,  GpuKind::overhead};

}  // namespace

TEST(GpuActivity, IntervalRecordsNeedAStartAndAnEndNotBeforeIt) {
  for (GpuKind k : kIntervalKinds) {
    SCOPED_TRACE(std::string(to_string(k)));
    EXPECT_FALSE(is_incomplete(act(k, 1000, 2000)));
    EXPECT_FALSE(is_incomplete(act(k, 1000, 1000)));  // too short for the clock: still a time
    EXPECT_TRUE(is_incomplete(act(k, 1000, 0)));      // unfinished when flushed
    EXPECT_TRUE(is_incomplete(act(k, 0, 2000)));      // never started, or not timed
    EXPECT_TRUE(is_incomplete(act(k, 0, 0)));
    EXPECT_TRUE(is_incomplete(act(k, 2000, 1000)));
  }
}

TEST(GpuActivity, InstantaneousRecordsNeedTheirTimestamp) {
  for (GpuKind k : {GpuKind::memory, GpuKind::marker}) {
    SCOPED_TRACE(std::string(to_string(k)));
    EXPECT_FALSE(is_incomplete(act(k, 1000, 1000)));
    EXPECT_TRUE(is_incomplete(act(k, 0, 0)));
  }
}
