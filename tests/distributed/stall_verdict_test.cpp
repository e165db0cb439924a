// The stall watch's answers and verdicts (distributed/stall_verdict.h): what a rank says, and
// who is named, and when the job stops, for each kind of stall: a rank silent (stopped, cut
// off), a rank alive that does not arrive, every rank in a call that does not end, a wait on
// some rank while another works on.
#include "distributed/stall_verdict.h"
#include "distributed/stall_watch.h"

#include <gtest/gtest.h>

namespace {

using namespace ts::distributed;

const std::vector<std::string> kHosts = {"h0", "h1", "h2"};

CallState call(std::string channel, int64_t seq, int64_t waited_ms, int peer = kEveryRank) {
  CallState c;
  c.what = channel == "ps" ? "pull wait" : "all_reduce";
  c.channel = std::move(channel);
  c.label = "bucket 3";
  c.seq = seq;
  c.peer = peer;
  c.iteration = 12;
  c.waited_ms = waited_ms;
  return c;
}

RankState rank_state(int rank, RunPhase phase, std::vector<CallState> in_flight, int64_t gradients_done) {
  RankState s;
  s.rank = rank;
  s.host = kHosts[static_cast<size_t>(rank)];
  s.phase = phase;
  s.iteration = 12;
  s.in_flight = std::move(in_flight);
  s.completed["gradients"] = gradients_done;
  return s;
}

TEST(StallVerdict, ARanksAnswerSurvivesItsEncoding) {
  RankState s = rank_state(2, RunPhase::evaluating, {call("gradients", 231, 1500)}, 230);
  s.in_flight[0].label = "tab\tand\nnewline";  // never split a record
  s.recent = {call("control", 57, 3), call("gradients", 230, 12)};
  const auto back = RankState::decode(s.encode());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->host, "h2");
  EXPECT_EQ(back->phase, RunPhase::evaluating);
  ASSERT_EQ(back->in_flight.size(), 1u);
  EXPECT_EQ(back->in_flight[0].label, "tab and newline");
  EXPECT_EQ(back->in_flight[0].seq, 231);
  EXPECT_EQ(back->in_flight[0].waited_ms, 1500);
  EXPECT_EQ(back->completed.at("gradients"), 230);
  ASSERT_EQ(back->recent.size(), 2u);
  EXPECT_EQ(back->recent[1].describe(), "gradients all_reduce #230 'bucket 3' (iteration 12)");
}

TEST(StallVerdict, AGarbledAnswerIsRefused) {
  EXPECT_FALSE(RankState::decode(""));
  EXPECT_FALSE(RankState::decode("R\t1\th1\tdreaming\t3\n"));  // no such phase
  EXPECT_FALSE(RankState::decode("R\t1\th1\ttraining\t3\nC\tgradients\tall_reduce\tx\t-1\t0\t0\tl\n"));
  EXPECT_FALSE(RankState::decode("X\t1\n"));
}

TEST(StallVerdict, ASilentRankStopsTheJobAtOnceAndIsNamedWithItsHost) {
  const RankState me = rank_state(0, RunPhase::training, {call("gradients", 231, 6000)}, 230);
  const std::vector<RankState> answered = {rank_state(2, RunPhase::training, {call("gradients", 231, 5900)}, 230)};
  const auto v = judge_stall(me, me.in_flight[0], answered, {1}, kHosts, StallLimits{.deadline_ms = 60'000});
  EXPECT_TRUE(v.stop) << "silence needs no deadline";
  EXPECT_NE(v.line.find("rank 0 (h0) has waited 6.0 s in gradients all_reduce #231 'bucket 3' (iteration 12)"),
            std::string::npos)
      << v.line;
  EXPECT_NE(v.line.find("rank 1 (h1) does not answer"), std::string::npos) << v.line;
  EXPECT_NE(v.line.find("rank 2 (h2): training, iteration 12, in gradients all_reduce #231"), std::string::npos)
      << "what the others were doing: " << v.line;
}

TEST(StallVerdict, ARankAliveThatDoesNotArriveIsNamedOnlyPastTheDeadline) {
  const RankState me = rank_state(0, RunPhase::training, {call("gradients", 231, 15'000)}, 230);
  // Rank 1 is still at call 229 of the gradients: it has not reached 231.
  std::vector<RankState> answered = {rank_state(1, RunPhase::training, {}, 229),
                                     rank_state(2, RunPhase::training, {call("gradients", 231, 14'000)}, 230)};
  auto v = judge_stall(me, me.in_flight[0], answered, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_FALSE(v.stop) << v.line;
  EXPECT_NE(v.line.find("waiting for rank 1 (h1), training, iteration 12, in no exchange (its last gradients call: "
                        "#229)"),
            std::string::npos)
      << v.line;
  EXPECT_EQ(v.line.find("rank 2 (h2),"), std::string::npos) << "rank 2 has reached the call: " << v.line;
  CallState later = me.in_flight[0];
  later.waited_ms = 20'000;
  v = judge_stall(me, later, answered, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_TRUE(v.stop);
  EXPECT_NE(v.line.find("alive but not arriving"), std::string::npos) << v.line;
}

TEST(StallVerdict, ARankThatIsPastTheCallDoesNotHoldItUp) {
  const RankState me = rank_state(1, RunPhase::training, {call("gradients", 231, 30'000)}, 230);
  const std::vector<RankState> answered = {rank_state(0, RunPhase::training, {}, 231)};
  const auto v = judge_stall(me, me.in_flight[0], answered, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_TRUE(v.stop) << "nobody it waits for, and the data does not come";
  EXPECT_NE(v.line.find("the data is not moving"), std::string::npos) << v.line;
}

TEST(StallVerdict, EveryRankInTheSameCallPastTheDeadlineIsALinkThatDoesNotMove) {
  const RankState me = rank_state(0, RunPhase::training, {call("gradients", 231, 25'000)}, 230);
  const std::vector<RankState> answered = {rank_state(1, RunPhase::training, {call("gradients", 231, 25'000)}, 230)};
  auto v = judge_stall(me, me.in_flight[0], answered, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_TRUE(v.stop);
  EXPECT_NE(v.line.find("every rank is in it, the data is not moving"), std::string::npos) << v.line;
  v = judge_stall(me, me.in_flight[0], answered, {}, kHosts, StallLimits{.deadline_ms = 0});
  EXPECT_FALSE(v.stop) << "no deadline: only silence stops";
}

TEST(StallVerdict, ARankEvaluatingOrWritingMayKeepTheOthersWaitingPastTheDeadline) {
  // Rank 0 writes the run (ending) while rank 1 waits in the last barrier.
  CallState barrier = call("control", 900, 120'000);
  barrier.what = "barrier";
  const RankState me = rank_state(1, RunPhase::ending, {barrier}, 500);
  RankState writing = rank_state(0, RunPhase::ending, {}, 500);
  writing.completed["control"] = 899;
  auto v = judge_stall(me, barrier, {writing}, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_FALSE(v.stop) << v.line;
  EXPECT_NE(v.line.find("waiting for rank 0 (h0), ending, iteration 12, in no exchange"), std::string::npos) << v.line;
  writing.phase = RunPhase::evaluating;
  v = judge_stall(me, barrier, {writing}, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_FALSE(v.stop) << v.line;
  writing.phase = RunPhase::training;  // the same wait on a rank that trains is a straggler
  v = judge_stall(me, barrier, {writing}, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_TRUE(v.stop) << v.line;
}

TEST(StallVerdict, AWaitOnOneServerNamesItWhenItAnswersButDoesNotReply) {
  const CallState pull = call("ps", 40, 25'000, 2);
  const RankState me = rank_state(0, RunPhase::training, {pull}, 0);
  const std::vector<RankState> answered = {rank_state(1, RunPhase::training, {}, 0),
                                           rank_state(2, RunPhase::training, {}, 0)};
  const auto v = judge_stall(me, pull, answered, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_TRUE(v.stop);
  EXPECT_NE(v.line.find("waiting for rank 2 (h2)"), std::string::npos) << v.line;
  EXPECT_EQ(v.line.find("rank 1 (h1),"), std::string::npos) << v.line;
}

TEST(StallVerdict, AWaitOnSomeRankGoesOnWhileAnotherWorks) {
  // An asynchronous worker at the workers' last barrier while the other still trains.
  CallState barrier = call("ps workers", 1, 300'000, kSomeRank);
  barrier.what = "barrier";
  const RankState me = rank_state(0, RunPhase::training, {barrier}, 0);
  std::vector<RankState> answered = {rank_state(1, RunPhase::training, {}, 0)};
  auto v = judge_stall(me, barrier, answered, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_FALSE(v.stop) << v.line;
  answered[0].in_flight = {call("ps", 77, 290'000, 2)};
  answered.push_back(rank_state(2, RunPhase::training, {call("ps", 3, 290'000, kSomeRank)}, 0));
  v = judge_stall(me, barrier, answered, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_TRUE(v.stop) << "every rank waits: nothing will come";
  EXPECT_NE(v.line.find("every rank waits"), std::string::npos) << v.line;
}

// Rank 0 waiting for the final records while rank 1's large final message is still on its way
// to it: both wait, but in one exchange that moves, so no deadline ends it.
TEST(StallVerdict, AWaitForAMessageOnItsWayGoesOn) {
  CallState gather = call("records", 1, 60'000, kSomeRank);
  gather.what = "wait";
  const RankState me = rank_state(0, RunPhase::evaluating, {gather}, 0);
  CallState send = call("records", 9, 59'000, 0);
  send.what = "send";
  const std::vector<RankState> answered = {rank_state(1, RunPhase::ending, {send}, 0)};
  auto v = judge_stall(me, gather, answered, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_FALSE(v.stop) << v.line;
  // Rank 1's side: it waits for rank 0, which answers and is not training: it goes on too.
  const auto w = judge_stall(answered[0], send, {me}, {}, kHosts, StallLimits{.deadline_ms = 20'000});
  EXPECT_FALSE(w.stop) << w.line;
  EXPECT_NE(w.line.find("waiting for rank 0 (h0), evaluating"), std::string::npos) << w.line;
}

TEST(StallVerdict, WaitsAreWrittenInTheirUnit) {
  EXPECT_EQ(seconds_text(850), "850 ms");
  EXPECT_EQ(seconds_text(12'345), "12.3 s");
}

// A stopped job's stored reason: "stalled: " and the verdict, or a time limit's line as it is
// (the collectives benchmark's --timeout; its exit code is read from it).
TEST(StallVerdict, ATimeLimitsLineIsItsOwnReason) {
  EXPECT_EQ(stall_reason("rank 0 (a) has waited 6.0 s"), "stalled: rank 0 (a) has waited 6.0 s");
  const std::string timed_out = std::string(kTimeoutWords) + "the sweep's --timeout of 3 s passed; rank 0 has waited";
  EXPECT_EQ(stall_reason(timed_out), timed_out);
}

}  // namespace
