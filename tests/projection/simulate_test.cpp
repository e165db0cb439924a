// The simulation on hand-made runs: every expected time below is worked out by hand from the
// source's phases and the link (1 byte per ns, no latency, copies free), as docs/projection.md
// describes the model.
#include "projection/simulate.h"

#include <gtest/gtest.h>

#include <stdexcept>

using namespace ts::projection;

namespace {

constexpr int64_t kMs = 1'000'000;

// One group of `bytes` per slot; each iteration: forward F, backward B with the slots' readiness
// at `ready` (ms after its start), optimizer O.
SourceRun make_source(std::vector<int64_t> bytes, std::vector<int64_t> ready_ms, std::vector<int64_t> backward_ms,
                      int64_t forward_ms = 10, int64_t optimizer_ms = 5) {
  SourceRun s;
  s.run.id = 1;
  s.run.threads = 1;
  SourceGroup g;
  for (size_t i = 0; i < bytes.size(); ++i) g.names.push_back("p" + std::to_string(i));
  g.bytes = std::move(bytes);
  for (size_t i = g.names.size(); i-- > 0;) g.arrival.push_back(static_cast<int>(i));
  s.groups.push_back(g);
  s.group_offset = {0};
  int64_t index = 1;
  for (int64_t b : backward_ms) {
    SourceIteration it;
    it.index = index++;
    it.samples = 4;
    const int64_t f = forward_ms * kMs, bw = b * kMs, o = optimizer_ms * kMs;
    SourcePhase forward{"forward", 0, f, -1, {}, {}};
    for (size_t slot = 0; slot < ready_ms.size(); ++slot)  // the front layer first
      forward.first_use.emplace_back(static_cast<int>(slot), static_cast<int64_t>(slot) * f / 2);
    it.phases.push_back(forward);
    SourcePhase back{"backward", f, f + bw, 0, {}, {}};
    for (size_t slot = 0; slot < ready_ms.size(); ++slot)
      back.ready.emplace_back(static_cast<int>(slot), std::min(ready_ms[slot], b) * kMs);
    it.phases.push_back(back);
    it.phases.push_back({"optimizer", f + bw, f + bw + o, -1, {}, {}});
    it.span_ns = f + bw + o;
    s.iterations.push_back(it);
  }
  return s;
}

// 1 byte per ns (1 GB/s) across 2 ranks, no latency.
LinkModel unit_link() {
  LinkModel m;
  m.sweep_ranks = 2;
  m.algbw_gbps = 1.0;
  m.p2p_gbps = 1.0;
  m.source = "test";
  return m;
}

// 1000 bytes per ns point to point: a parameter server's messages take next to nothing.
LinkModel fast_link() {
  LinkModel m = unit_link();
  m.p2p_gbps = 1000;
  return m;
}

Knobs two_ranks() {
  Knobs k;
  k.ranks = 2;
  k.bucket_mb = 1.0 / 1024;  // 1 KiB buckets: every tensor below its own bucket
  return k;
}

// The parameter server's answers' time in all, on the server's rank (worker 0).
double reply_ns(const Projection& p) {
  double ns = 0;
  for (const auto& it : p.iterations) {
    for (const auto& c : it.calls) {
      if (it.rank == 0 && c.what == "ps reply") ns += c.end_ns - c.start_ns;
    }
  }
  return ns;
}

}  // namespace

TEST(Projection, WithoutOverlapEveryBucketFollowsTheBackward) {
  // Two tensors of 10 ms each on the link (10 MB at 1 byte/ns).
  const auto s = make_source({10'000'000, 10'000'000}, {20, 60}, {100});
  Knobs k = two_ranks();
  k.overlap = false;
  const auto p = project(s, unit_link(), k);
  ASSERT_EQ(p.iterations.size(), 2u);  // one iteration on each of 2 ranks
  EXPECT_NEAR(p.median_span_ns, (10 + 100 + 20 + 5) * kMs, 1e3);
  const auto& it = p.iterations[0];
  EXPECT_NEAR(it.wait_ns, 20 * kMs, 1e3);
  EXPECT_NEAR(it.comm_ns, 20 * kMs, 1e3);
  EXPECT_NEAR(it.exposed_ns, 20 * kMs, 1e3);
  EXPECT_NEAR(it.overlap_ns, 0, 1e3);
  EXPECT_NEAR(it.compute_ns, 115 * kMs, 1e3);
  EXPECT_EQ(p.bucket_bytes.size(), 2u);
}

TEST(Projection, OverlapHidesWhatEndsBeforeTheBackward) {
  // Arrival order (last slot first): slot 1 ready at 60 ms goes first, 60-70; slot 0 (ready at
  // 20) waits for it, 70-80: both within the 100 ms backward.
  const auto s = make_source({10'000'000, 10'000'000}, {20, 60}, {100});
  auto p = project(s, unit_link(), two_ranks());
  EXPECT_NEAR(p.median_span_ns, 115 * kMs, 1e3);
  EXPECT_NEAR(p.iterations[0].overlap_ns, 20 * kMs, 1e3);
  EXPECT_NEAR(p.iterations[0].exposed_ns, 0, 1e3);
  // Slot 0 ready at the end of backward (slot 1 went at 60-70): its 10 ms are exposed.
  const auto late = make_source({10'000'000, 10'000'000}, {100, 60}, {100});
  p = project(late, unit_link(), two_ranks());
  EXPECT_NEAR(p.median_span_ns, 125 * kMs, 1e3);
  EXPECT_NEAR(p.iterations[0].exposed_ns, 10 * kMs, 1e3);
}

TEST(Projection, BucketsHoldSeveralTensorsUpToTheirSize) {
  // One 25 MiB bucket holds both: it starts when the later one is ready (60 ms), ends at 80.
  const auto s = make_source({10'000'000, 10'000'000}, {20, 60}, {100});
  Knobs k = two_ranks();
  k.bucket_mb = 25;
  const auto p = project(s, unit_link(), k);
  EXPECT_EQ(p.bucket_bytes.size(), 1u);
  EXPECT_NEAR(p.median_span_ns, 115 * kMs, 1e3);
  // Reverse registration order puts slot 1 first too; the same here.
  k.arrival_order = false;
  EXPECT_NEAR(project(s, unit_link(), k).median_span_ns, 115 * kMs, 1e3);
}

TEST(Projection, SharedCoresSlowComputeAndCommunicationWhileTheyOverlap) {
  // One 50 ms tensor ready at the start of a 100 ms backward. A core of its own for the
  // communication: hidden (115 ms). One core for both, the call busy on it the whole time
  // (the busy thread kept half its rate, the call half its pace): both at half speed until the
  // call ends at 100 ms (50 ms of backward done), then 50 ms more: the backward ends at 150.
  auto s = make_source({50'000'000}, {0}, {100});
  auto link = unit_link();
  EXPECT_NEAR(project(s, link, two_ranks()).median_span_ns, 115 * kMs, 1e3);
  link.beside_rate_table = {{1, 0.5}};
  link.beside_pace_table = {{1, 0.5}};
  link.sweep_cores_per_rank = 1;
  Knobs k = two_ranks();
  k.cores_per_rank = 1;
  const auto p = project(s, link, k);
  EXPECT_NEAR(p.median_span_ns, 165 * kMs, 1e3);
  EXPECT_NEAR(p.iterations[0].overlap_ns, 100 * kMs, 1e3);
  // Two cores per rank: the one compute thread and the call each have one.
  k.cores_per_rank = 2;
  EXPECT_NEAR(project(s, link, k).median_span_ns, 115 * kMs, 1e3);
}

TEST(Projection, RanksWaitForTheSlowestInEveryCollective) {
  // The whole data set's source: rank 0 replays iteration 1 (backward 100 ms), rank 1 iteration 2
  // (200 ms). The tensor is ready at the end on each; the all-reduce starts when rank 1 is in it
  // (210 ms from the start) and takes 10: both ranks' iterations end at 225 ms.
  const auto s = make_source({10'000'000}, {1000}, {100, 200});
  const auto p = project(s, unit_link(), two_ranks());
  ASSERT_EQ(p.iterations.size(), 4u);  // 2 iterations x 2 ranks
  EXPECT_NEAR(p.iterations[0].span_ns, 225 * kMs, 1e3);
  EXPECT_NEAR(p.iterations[2].span_ns, 225 * kMs, 1e3);  // rank 1's first
  EXPECT_NEAR(p.iterations[0].wait_ns, 110 * kMs, 1e3);  // rank 0 waited for rank 1, then the call
  // A source that read rank 0's shard of 2 stands for every rank: each replays the same iteration.
  auto sharded = s;
  sharded.shard_ranks = 2;
  const auto q = project(sharded, unit_link(), two_ranks());
  EXPECT_NEAR(q.iterations[0].span_ns, 125 * kMs, 1e3);
  EXPECT_NEAR(q.iterations[1].span_ns, 225 * kMs, 1e3);
}

TEST(Projection, PriorityNegotiatesAndSendsTheFrontMostReadyFirst) {
  // 3 tensors of 10 ms; ready at 10 (slot 2), 20 (slot 1) and 90 ms (slot 0). With priority the
  // thread takes slot 2 at 10 (10-20), slot 1 at 20 (20-30), slot 0 at 90 (90-100); each after
  // an agreement of 24 bytes (24 ns here): the backward's end is hardly delayed.
  const auto s = make_source({10'000'000, 10'000'000, 10'000'000}, {90, 20, 10}, {100});
  Knobs k = two_ranks();
  k.priority = true;
  k.cross_barrier = false;
  k.partition_mb = 10;
  const auto p = project(s, unit_link(), k);
  EXPECT_NEAR(p.median_span_ns, 115 * kMs, 1e3);
  int negotiations = 0;
  for (const auto& c : p.iterations[0].calls) negotiations += c.what == "priority negotiation";
  EXPECT_EQ(negotiations, 3);
}

TEST(Projection, CrossBarrierLetsTheNextForwardStartWhileTheBackLayersAreInFlight) {
  // Slot 0 (the front layer, 16 MiB, used first by the forward) is final at the backward's end
  // (100 ms), slot 1 (32 MiB: two partitions of 16 MiB, used 5 ms into the forward) at 90 ms; a
  // partition takes P = 16.78 ms. Priority: 1a at 90, slot 0 at 90+P (it went first), 1b at
  // 90+2P, done at 90+3P. Without cross-barrier the iteration is forward + 90 + 3P + the
  // optimizer's 6 ms = 106 + 3P. With it the backward's end does not wait; the next forward waits
  // for slot 0 until 90+2P (2P-10 after its start), updates it (6 ms x 16/48 = 2 ms), computes 5 ms,
  // waits for slot 1 until 90+3P (P-7 more), updates it (4 ms), computes 5 ms: a forward of
  // 3P-1 and an iteration of 99+3P, the waits 3P-17.
  constexpr int64_t kMiB = 1 << 20;
  constexpr double P = 16.0 * kMiB;  // ns at 1 byte per ns
  const auto s = make_source({16 * kMiB, 32 * kMiB}, {100, 90}, {100, 100, 100, 100}, 10, 6);
  Knobs k = two_ranks();
  k.priority = true;
  k.partition_mb = 16;
  k.cross_barrier = false;
  const auto barrier = project(s, unit_link(), k);
  EXPECT_NEAR(barrier.iterations[1].span_ns, 106 * kMs + 3 * P, 1e4);
  k.cross_barrier = true;
  const auto p = project(s, unit_link(), k);
  ASSERT_TRUE(p.knobs.cross_barrier);
  const ProjectedIteration& it = p.iterations[1];  // rank 0's second: the first with a pending step
  ASSERT_EQ(it.rank, 0);
  EXPECT_NEAR(it.span_ns, 99 * kMs + 3 * P, 1e4);
  EXPECT_NEAR(it.wait_ns, 3 * P - 17 * kMs, 1e4);
  EXPECT_NEAR(it.compute_ns, 116 * kMs, 1e4);  // forward 10, updates 6, backward 100
  // Its communication: the last step's three partitions from the iteration's start (3P - 10 ms),
  // and its own backward's first 10 ms of partition 1a.
  EXPECT_NEAR(it.comm_ns, 3 * P, 1e5);
  // The first iteration had nothing pending: forward and backward alone.
  EXPECT_NEAR(p.iterations[0].span_ns, 110 * kMs, 1e4);
  // A step that cannot be cut per parameter (global-norm clipping) takes none, and says so.
  auto clipped = s;
  clipped.groups[0].clipped = true;
  const auto none = project(clipped, unit_link(), k);
  EXPECT_FALSE(none.knobs.cross_barrier);
  bool said = false;
  for (const auto& a : none.assumptions) said = said || a.find("no cross-barrier updates") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Projection, AParameterServerOnAFastLinkCostsTheWorkerItsOptimizer) {
  // Workers push and pull over a link of 1000 bytes per ns: ~0 time; the servers run the
  // optimizer (5 ms per iteration in the source, now the server's), so each iteration is
  // forward + backward, and the update sits off the workers' paths.
  auto s = make_source({1'000'000, 1'000'000}, {20, 60}, {100, 100, 100});
  s.memory_gbps = 1000;
  auto link = fast_link();
  Knobs k = two_ranks();
  k.strategy = Strategy::ps;
  const auto p = project(s, link, k);
  EXPECT_NEAR(p.median_span_ns, 110 * kMs, 0.5 * kMs);
  // A slow link: the next forward waits for the pulled values.
  link.p2p_gbps = 0.01;  // 1 MB per 100 ms
  const auto slow = project(s, link, k);
  EXPECT_GT(slow.median_span_ns, 200 * kMs);
  EXPECT_GT(slow.median(&ProjectedIteration::wait_ns, 1), 50 * kMs);
}

TEST(Projection, AParameterServersPushesPastTheIterationsEndAreTheNextIterationsCommunication) {
  // A clipped group is pushed after the backward, which ends the iteration (the workers'
  // optimizer phase is empty): worker 1's two keys of 1 MB take 100 ms each across the link, and
  // the server's answers to it as long. Both are the next iteration's communication, as a measured
  // run's timeline is cut: worker 1's pushes on its rank, the answers on the server's (worker 0).
  // Worker 0's own pushes (local, 0.1 ms) fall between its iterations, while it waits for worker
  // 1 to agree to go on: neither iteration's, as in a measured run (agree_stop precedes the span).
  auto s = make_source({1'000'000, 1'000'000}, {20, 60}, {100, 100, 100, 100});
  s.groups[0].clipped = true;
  s.memory_gbps = 1000;
  auto link = unit_link();
  link.p2p_gbps = 0.01;  // 1 MB per 100 ms
  Knobs k = two_ranks();
  k.strategy = Strategy::ps;
  const auto p = project(s, link, k);
  ASSERT_EQ(p.iterations.size(), 8u);  // 2 ranks x 4, by rank
  for (size_t i = 0; i < p.iterations.size(); ++i) {
    const ProjectedIteration& it = p.iterations[i];
    const bool last = i % 4 == 3;  // a rank's last keeps its own calls whole
    SCOPED_TRACE(testing::Message() << "rank " << it.rank << ", its iteration " << i % 4);
    EXPECT_GE(it.comm_ns, 200 * kMs);
    EXPECT_LE(it.comm_ns, it.span_ns);
    EXPECT_NEAR(it.compute_ns + it.comm_ns - it.overlap_ns + it.idle_ns, it.span_ns, 1e3);
    int pushes = 0, replies = 0;
    for (const auto& c : it.calls) {
      EXPECT_GE(c.start_ns, 0);
      if (!last) {
        EXPECT_LE(c.end_ns, it.span_ns + 1);
      }
      if (!(c.start_ns < it.span_ns)) continue;  // begun at its end: its own pushes (the last's)
      pushes += c.what == "push";
      replies += c.what == "ps reply";
    }
    if (it.rank == 1) {
      EXPECT_EQ(pushes, 2);  // the previous iteration's, both keys
      EXPECT_EQ(replies, 0);
    } else {
      EXPECT_EQ(replies, 4);  // two keys to each worker, sent by worker 0's server
    }
  }
}

TEST(Projection, AsynchronousWorkersDoNotWaitForEachOther) {
  // Rank 0 replays the source's 100 ms backwards, rank 1 its 300 ms ones (a source of the whole
  // data set: rank r replays iteration 2j + r mod 4); each pushes its one key at its backward's
  // end over a fast link, and the server runs the optimizer (5 ms per update; the workers' phase
  // is empty). Sync: a key waits for both pushes, so rank 0 goes at rank 1's pace (its
  // iterations start 10 + 300 ms + an update apart, the wait for rank 1 between them). Async:
  // each push is updated and answered at once, and rank 0 goes at its own pace (10 + 100 + its
  // update). Bounded with no staleness allowed: rank 0's answer waits for rank 1's push of the
  // same step, rank 1's pace again, now within rank 0's iterations; with more staleness allowed
  // than the run has iterations, it never binds.
  auto s = make_source({1'000'000}, {1000}, {100, 300, 100, 300});
  s.memory_gbps = 1000;
  auto link = fast_link();
  Knobs k = two_ranks();
  k.strategy = Strategy::ps;
  const auto sync = project(s, link, k);
  EXPECT_NEAR(sync.iterations[2].start_ns - sync.iterations[1].start_ns, 315 * kMs, 3 * kMs);
  EXPECT_NEAR(sync.median_span_ns, 115 * kMs, 2 * kMs);
  k.ps_mode = ts::vocabulary::PsMode::async;
  const auto async = project(s, link, k);
  EXPECT_NEAR(async.iterations[2].start_ns - async.iterations[1].start_ns, 115 * kMs, 2 * kMs);
  EXPECT_NEAR(async.median_span_ns, 115 * kMs, 2 * kMs);
  EXPECT_NEAR(async.median(&ProjectedIteration::span_ns, 1), 315 * kMs, 3 * kMs);
  EXPECT_NEAR(async.median(&ProjectedIteration::wait_ns, 0), 5 * kMs, 1 * kMs);
  k.ps_mode = ts::vocabulary::PsMode::bounded;
  k.staleness = 0;
  const auto bounded = project(s, link, k);
  EXPECT_NEAR(bounded.median_span_ns, 315 * kMs, 5 * kMs);
  EXPECT_GT(bounded.median(&ProjectedIteration::wait_ns, 0), 190 * kMs);
  k.staleness = 100;
  EXPECT_NEAR(project(s, link, k).median_span_ns, 115 * kMs, 2 * kMs);
}

TEST(Projection, EagerServersAnswerEveryWorkerAndAForwardWaitsOnlyForThePushBeforeLast) {
  // One 1 MB key pushed at the backward's end; every message across the link takes about 25 ms
  // (12.5 ms of latency for the transfer, as much for MPI's handshake). Async: worker 1's next
  // forward waits for the answer to the push it just made (the push, the 5 ms update, the answer:
  // ~55 ms). Eager: for the value answering the push before, which came long ago, so it goes at
  // its compute's pace (60 + 100 ms). Eager's server sends the new value to both
  // workers after each update: twice async's answers to worker 1.
  auto s = make_source({1'000'000}, {1000}, {100, 100, 100, 100, 100}, 60);
  s.shard_ranks = 2;  // every rank replays the same iterations
  s.memory_gbps = 1000;
  auto link = fast_link();
  link.p2p_latency_ns = 12.5 * kMs;
  Knobs k = two_ranks();
  k.strategy = Strategy::ps;
  k.ps_mode = ts::vocabulary::PsMode::async;
  const auto async = project(s, link, k);
  EXPECT_NEAR(async.median(&ProjectedIteration::wait_ns, 1), 55 * kMs, 2 * kMs);
  EXPECT_NEAR(async.median(&ProjectedIteration::span_ns, 1), 215 * kMs, 2 * kMs);
  k.ps_mode = ts::vocabulary::PsMode::eager;
  const auto eager = project(s, link, k);
  EXPECT_LT(eager.median(&ProjectedIteration::wait_ns, 1), 1 * kMs);
  EXPECT_NEAR(eager.median(&ProjectedIteration::span_ns, 1), 160 * kMs, 2 * kMs);
  // Async answers worker 1 once a step, eager twice.
  EXPECT_NEAR(reply_ns(eager) / reply_ns(async), 2.0, 0.3);
}

namespace {

// An actor-learner source (a3c): two learners, each iteration four updates of 10 ms (1 ms of it
// the local step), two on each learner, then 1 ms more; one gradient of 1 MB.
SourceRun make_learner_source(int iterations) {
  SourceRun s;
  s.run.id = 1;
  s.run.threads = 1;
  s.learners = 2;
  SourceGroup g;
  g.names = {"p0"};
  g.bytes = {1'000'000};
  g.arrival = {0};
  s.groups.push_back(g);
  s.group_offset = {0};
  s.shard_ranks = 2;
  s.memory_gbps = 1000;
  for (int i = 0; i < iterations; ++i) {
    SourceIteration it;
    it.index = i + 1;
    it.samples = 20;
    for (int u = 0; u < 4; ++u) it.updates.push_back({u % 2, (u / 2) * 10 * kMs, (u / 2 + 1) * 10 * kMs, 1 * kMs});
    it.span_ns = 21 * kMs;
    s.iterations.push_back(it);
  }
  return s;
}

}  // namespace

TEST(Projection, ActorLearnersPushEveryUpdateAndWaitOnlyWhenTwoAreUnsent) {
  // A fast link: each learner's two updates without their local step (9 ms each), then the 1 ms
  // after them. A slow one (a message of 1 MB: 20 ms): worker 1 sends four updates an iteration,
  // 80 ms, and its learners wait whenever two are still unsent, so it goes at the link's pace.
  // Eager answers both workers after every update: twice async's answers; the learners' reads
  // never wait for them.
  const auto s = make_learner_source(6);
  auto link = fast_link();
  Knobs k = two_ranks();
  k.strategy = Strategy::ps;
  k.ps_mode = ts::vocabulary::PsMode::async;
  const auto fast = project(s, link, k);
  EXPECT_NEAR(fast.median_span_ns, 19 * kMs, 0.5 * kMs);
  EXPECT_LT(fast.median(&ProjectedIteration::wait_ns, 1), 0.5 * kMs);
  link.p2p_gbps = 0.05;
  const auto slow = project(s, link, k);
  EXPECT_NEAR(slow.median(&ProjectedIteration::span_ns, 1), 80 * kMs, 8 * kMs);
  EXPECT_GT(slow.median(&ProjectedIteration::wait_ns, 1), 40 * kMs);
  k.ps_mode = ts::vocabulary::PsMode::eager;
  const auto eager = project(s, link, k);
  EXPECT_NEAR(eager.median(&ProjectedIteration::span_ns, 1), slow.median(&ProjectedIteration::span_ns, 1), 8 * kMs);
  EXPECT_NEAR(reply_ns(eager) / reply_ns(slow), 2.0, 0.3);
  // Learners push asynchronously: a sync or bounded server, or all-reduce, is refused.
  for (const auto mode : {ts::vocabulary::PsMode::sync, ts::vocabulary::PsMode::bounded}) {
    k.ps_mode = mode;
    EXPECT_THROW(project(s, link, k), std::invalid_argument);
  }
  EXPECT_THROW(project(s, link, two_ranks()), std::invalid_argument);
}

TEST(Projection, BadKnobsAreRefused) {
  const auto s = make_source({1000}, {0}, {10});
  Knobs k = two_ranks();
  k.ranks = 1;
  EXPECT_THROW(project(s, unit_link(), k), std::invalid_argument);
  k = two_ranks();
  k.bucket_mb = 0;
  EXPECT_THROW(project(s, unit_link(), k), std::invalid_argument);
  k = two_ranks();
  k.strategy = Strategy::ps;
  k.ps_priority = true;
  EXPECT_THROW(project(s, unit_link(), k), std::invalid_argument);
  k.ps_priority = false;
  k.ps_mode = ts::vocabulary::PsMode::bounded;
  k.staleness = -1;
  EXPECT_THROW(project(s, unit_link(), k), std::invalid_argument);
}
