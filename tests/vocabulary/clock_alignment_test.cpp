// The clock offset between ranks from ping-pong samples (vocabulary/clock_alignment.h): the
// bound the samples give, the drift line, and the mapping to the reference clock.
#include "vocabulary/clock_alignment.h"

#include <gtest/gtest.h>

#include <vector>

namespace ts::vocabulary {
namespace {

// A peer whose clock reads reference + `offset`, answering `delay` after a question sent at `sent`
// that took `there` to arrive and `back` to return.
ClockPing ping(int64_t sent, int64_t offset, int64_t there, int64_t back) {
  return {sent, sent + there + offset, sent + there + back};
}

TEST(ClockAlignment, ThePingsBoundTheOffsetAndTheTrueOneIsWithin) {
  const int64_t offset = 3'000'000'123;
  // Asymmetric paths (40 us there, 10 us back; 5 us and 95 us): each interval holds the truth.
  const std::vector<ClockPing> pings = {ping(1'000, offset, 40'000, 10'000), ping(200'000, offset, 5'000, 95'000),
                                        ping(400'000, offset, 30'000, 30'000)};
  const auto o = estimate_offset(pings);
  ASSERT_TRUE(o);
  EXPECT_LE(std::abs(o->offset_ns - offset), o->uncertainty_ns);
  // The intersection of [peer - received, peer - sent] is narrower than any one ping's interval.
  EXPECT_LT(o->uncertainty_ns, 25'000);
  EXPECT_EQ(o->pings, 3);
  EXPECT_EQ(o->min_round_trip_ns, 50'000);
}

TEST(ClockAlignment, OnePingGivesItsMiddleAndHalfItsRoundTrip) {
  const std::vector<ClockPing> one = {{100, 1'000'050, 200}};
  const auto o = estimate_offset(one);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->offset_ns, 999'900);  // the interval [1'000'050 - 200, 1'000'050 - 100]
  EXPECT_EQ(o->uncertainty_ns, 50);
  EXPECT_EQ(o->at_ns, 150);
}

TEST(ClockAlignment, DisagreeingPingsFallBackToTheFastest) {
  // The peer's clock stepped by 1 ms between the pings: no offset fits both; the fastest decides.
  const std::vector<ClockPing> pings = {ping(0, 0, 10'000, 10'000), ping(100'000, 1'000'000, 2'000, 2'000)};
  const auto o = estimate_offset(pings);
  ASSERT_TRUE(o);
  EXPECT_LE(std::abs(o->offset_ns - 1'000'000), o->uncertainty_ns);
  EXPECT_LE(o->uncertainty_ns, 2'000);
}

TEST(ClockAlignment, NoPingsOrAnAnswerBeforeItsQuestionGiveNothing) {
  EXPECT_FALSE(estimate_offset({}));
  const std::vector<ClockPing> bad = {{500, 0, 400}};
  EXPECT_FALSE(estimate_offset(bad));
}

TEST(ClockAlignment, TheDriftLineMapsThePeersClockOntoTheReference) {
  // The peer runs 20 ppm fast: 3 s ahead at reference time 1 s, 3 s + 20 us at 2 s.
  ClockOffset start{3'000'000'000, 40, 1'000'000'000, 0, 8}, end{3'000'020'000, 60, 2'000'000'000, 0, 8};
  const ClockModel m = clock_model(start, end);
  EXPECT_NEAR(m.drift, 20e-6, 1e-12);
  EXPECT_NEAR(m.drift_uncertainty, 100e-9, 1e-15);  // 40 + 60 ns over 1 s
  EXPECT_EQ(m.uncertainty_ns, 60);
  for (const int64_t ref : {int64_t{1'000'000'000}, int64_t{1'500'000'000}, int64_t{2'000'000'000}, int64_t{0}}) {
    const int64_t peer = ref + 3'000'000'000 + static_cast<int64_t>(20e-6 * static_cast<double>(ref - 1'000'000'000));
    EXPECT_NEAR(static_cast<double>(m.to_reference(peer)), static_cast<double>(ref), 1.0) << ref;
    EXPECT_NEAR(static_cast<double>(m.from_reference(ref)), static_cast<double>(peer), 1.0) << ref;
  }
  // One measurement: an offset, no drift.
  const ClockModel once = clock_model(start);
  EXPECT_EQ(once.drift, 0);
  EXPECT_EQ(once.to_reference(3'000'000'500), 500);
  EXPECT_EQ(once.from_reference(500), 3'000'000'500);
}

}  // namespace
}  // namespace ts::vocabulary
