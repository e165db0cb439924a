// The CUPTI activity kinds the GPU tracer enables (the list its start() enables, no GPU needed):
// never NVTX markers (our ranges are the CPU tracer's; CUPTI would only see them through an
// injection that nothing of ours sets, and CUPTI 13.0's NVTX handling has crashed processes),
// never the serialising kernel kind, and what attribution needs: concurrent kernels, runtime and
// driver API records (cuDNN and cuBLAS launch through the driver) and external correlation.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "profiler/cupti_kinds.h"

using namespace ts::profiler;

namespace {

bool enabled(CUpti_ActivityKind k) {
  const auto kinds = cupti_activity_kinds();
  return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
}

}  // namespace

TEST(CuptiKinds, NoNvtxMarkersAndNoSerialisingKernelKind) {
  EXPECT_FALSE(enabled(CUPTI_ACTIVITY_KIND_MARKER));
  EXPECT_FALSE(enabled(CUPTI_ACTIVITY_KIND_MARKER_DATA));
  EXPECT_FALSE(enabled(CUPTI_ACTIVITY_KIND_KERNEL));
}

TEST(CuptiKinds, WhatAttributionAndTheBreakdownNeedEachOnce) {
  for (CUpti_ActivityKind k :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}) {
    EXPECT_TRUE(enabled(k)) << "kind " << k;
  }
  const auto kinds = cupti_activity_kinds();
  EXPECT_EQ(std::set<CUpti_ActivityKind>(kinds.begin(), kinds.end()).size(), kinds.size());
}
