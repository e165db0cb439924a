// The bucket rule data parallelism builds by and projections simulate by (vocabulary/bucket_plan.h).
#include "vocabulary/bucket_plan.h"

#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>

using ts::vocabulary::mib_to_floats;
using ts::vocabulary::plan_buckets;

namespace {
constexpr int64_t kWhole = std::numeric_limits<int64_t>::max();
}

TEST(BucketPlan, GradientsFillBucketsInOrderUpToTheCapacity) {
  // 3 + 4 fit in 8; 5 opens a new bucket; 9 is larger than a bucket: one of its own.
  const auto b = plan_buckets({3, 4, 5, 9}, {0, 1, 2, 3}, 8, kWhole);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].count, 7);
  ASSERT_EQ(b[0].units.size(), 2u);
  EXPECT_EQ(b[0].units[1].slot, 1);
  EXPECT_EQ(b[0].units[1].bucket_offset, 3);
  EXPECT_EQ(b[1].count, 5);
  EXPECT_EQ(b[2].count, 9);
  EXPECT_EQ(b[2].units.front().slot, 3);
}

TEST(BucketPlan, TheOrderDecidesWhatSharesABucketAndPriorityIsTheLowestSlot) {
  const auto b = plan_buckets({3, 4, 5}, {2, 1, 0}, 9, kWhole);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].units[0].slot, 2);
  EXPECT_EQ(b[0].units[1].slot, 1);
  EXPECT_EQ(b[0].priority, 1);
  EXPECT_EQ(b[1].priority, 0);
}

TEST(BucketPlan, PiecesCutAGradientIntoPartitions) {
  const auto b = plan_buckets({10, 2}, {0, 1}, 4, 4);
  ASSERT_EQ(b.size(), 3u);  // 4 | 4 | 2 + 2
  EXPECT_EQ(b[0].units[0].offset, 0);
  EXPECT_EQ(b[1].units[0].offset, 4);
  EXPECT_EQ(b[2].count, 4);
  ASSERT_EQ(b[2].units.size(), 2u);
  EXPECT_EQ(b[2].units[0].offset, 8);
  EXPECT_EQ(b[2].units[1].slot, 1);
}

TEST(BucketPlan, EmptyGradientsMakeNoUnitAndBadInputIsRefused) {
  const auto b = plan_buckets({0, 2}, {0, 1}, 4, kWhole);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].units.size(), 1u);
  EXPECT_THROW(plan_buckets({1}, {1}, 4, kWhole), std::out_of_range);
  EXPECT_THROW(plan_buckets({1}, {0}, 0, kWhole), std::invalid_argument);
  EXPECT_EQ(mib_to_floats(1.0), 262144);
  EXPECT_EQ(mib_to_floats(0.0), 1);
}
