#include "reports/number_format.h"

#include <gtest/gtest.h>

using namespace ts::reports;

TEST(NumberFormat, ACountTakesItsNounsNumber) {
  EXPECT_EQ(counted(1, "thread"), "1 thread");
  EXPECT_EQ(counted(0, "thread"), "0 threads");
  EXPECT_EQ(counted(2, "timed iteration"), "2 timed iterations");
  EXPECT_EQ(counted(1234, "event"), "1,234 events");
  EXPECT_EQ(counted(1, "activity", "activities"), "1 activity");
  EXPECT_EQ(counted(3, "activity", "activities"), "3 activities");
  EXPECT_EQ(plural(1, "call"), "call");
  EXPECT_EQ(plural(-1, "call"), "calls");
}

TEST(NumberFormat, AUnitInThePluralIsSingularForOne) {
  EXPECT_EQ(units_for(1, "images"), "image");
  EXPECT_EQ(units_for(1, "sentence pairs"), "sentence pair");
  EXPECT_EQ(units_for(32, "images"), "images");
  EXPECT_EQ(units_for(0, "rollout steps"), "rollout steps");
}

TEST(NumberFormat, CommasGroupThousands) {
  EXPECT_EQ(with_commas(25557032), "25,557,032");
  EXPECT_EQ(with_commas(-1000), "-1,000");
  EXPECT_EQ(with_commas(999), "999");
}
