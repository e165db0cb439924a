// The CUPTI activity kinds the GPU tracer enables (the list its start() enables, no GPU needed):
// never NVTX markers (our ranges are the CPU tracer's; CUPTI would only see them through an
// injection that nothing of ours sets, and CUPTI 13.0's NVTX handling has crashed processes),
// never the serialising kernel kind, and what attribution needs: concurrent kernels, runtime and
// driver API records (cuDNN and cuBLAS launch through the driver) and external correlation.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

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

// TS_CUPTI_LEAVE_OUT: what each kind costs is measured by leaving it out (docs/gpu-machine.md).
TEST(CuptiKinds, KindsCanBeLeftOutByNameButNotTheKernels) {
  const auto all = cupti_activity_kinds();
  EXPECT_EQ(cupti_activity_kinds_without("").size(), all.size());
  const auto fewer = cupti_activity_kinds_without("driver,memory");
  EXPECT_EQ(fewer.size(), all.size() - 2);
  EXPECT_EQ(std::count(fewer.begin(), fewer.end(), CUPTI_ACTIVITY_KIND_DRIVER), 0);
  EXPECT_EQ(std::count(fewer.begin(), fewer.end(), CUPTI_ACTIVITY_KIND_MEMORY2), 0);
  EXPECT_EQ(fewer.front(), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);  // the order kept
  EXPECT_EQ(cupti_activity_kinds_without(",runtime,").size(), all.size() - 1);
  for (CUpti_ActivityKind k : all) {
    if (k != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      EXPECT_EQ(cupti_activity_kinds_without(cupti_kind_name(k)).size(), all.size() - 1) << cupti_kind_name(k);
    }
  }
  EXPECT_THROW(cupti_activity_kinds_without("kernel"), std::invalid_argument);
  EXPECT_THROW(cupti_activity_kinds_without("drivers"), std::invalid_argument);
  EXPECT_THROW(cupti_activity_kinds_without("driver,driver"), std::invalid_argument);  // named twice
  try {
    cupti_activity_kinds_without("nvtx");
    FAIL() << "nvtx accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the kinds: memcpy, memset"), std::string::npos) << e.what();
  }
}
