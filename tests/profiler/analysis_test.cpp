#include "profiler/analysis.h"

#include <gtest/gtest.h>

#include "profiler/tracer.h"

namespace ts::profiler {
namespace {

struct Trace {
  Tracer tracer;
  std::vector<Event> events;
  void add(EventKind kind, std::string_view name, int64_t start, int64_t end, int32_t iteration, Pass pass = Pass::none,
           std::string_view layer = "", uint32_t thread = 0) {
    events.push_back(Event{start, end, tracer.intern(name), tracer.intern(layer), kind, pass, iteration, thread});
  }
};

TEST(PhaseTimes, PerIterationPhasesAndOther) {
  Trace t;
  // iteration 0: [0, 100): data 10, forward 30, backward 40, optimizer 10 -> other 10
  t.add(EventKind::iteration, "iteration", 0, 100, 0);
  t.add(EventKind::phase, "data", 0, 10, 0);
  t.add(EventKind::phase, "forward", 10, 40, 0);
  t.add(EventKind::phase, "backward", 40, 80, 0);
  t.add(EventKind::phase, "optimizer", 85, 95, 0);
  // iteration 1: [100, 200): repeated forward (critic steps) and an unknown phase name
  t.add(EventKind::iteration, "iteration", 100, 200, 1);
  t.add(EventKind::phase, "forward", 100, 120, 1);
  t.add(EventKind::phase, "forward", 130, 150, 1);
  t.add(EventKind::phase, "checkpoint", 150, 200, 1);
  // a phase of an iteration without iteration event is ignored
  t.add(EventKind::phase, "data", 300, 310, 5);
  const auto p = phase_times(t.events, t.tracer);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].index, 0);
  EXPECT_EQ(p[0].span_ns(), 100);
  EXPECT_EQ(p[0].data_ns, 10);
  EXPECT_EQ(p[0].forward_ns, 30);
  EXPECT_EQ(p[0].backward_ns, 40);
  EXPECT_EQ(p[0].optimizer_ns, 10);
  EXPECT_EQ(p[0].other_ns, 10);
  EXPECT_EQ(p[1].index, 1);
  EXPECT_EQ(p[1].forward_ns, 40);
  EXPECT_EQ(p[1].data_ns, 0);
  EXPECT_EQ(p[1].other_ns, 60);
}

// Cross-barrier updates the parameters inside the next forward (and the rest at backward's
// start): those optimizer phases count for the optimizer, not twice. Another thread's phase
// over the same time is not nested in this thread's.
TEST(PhaseTimes, NestedPhasesCountForThemselvesOnly) {
  Trace t;
  t.add(EventKind::iteration, "iteration", 0, 100, 0);
  t.add(EventKind::phase, "forward", 0, 50, 0);
  t.add(EventKind::phase, "optimizer", 5, 10, 0);   // in forward
  t.add(EventKind::phase, "optimizer", 20, 22, 0);  // in forward
  t.add(EventKind::phase, "backward", 50, 100, 0);
  t.add(EventKind::phase, "optimizer", 50, 60, 0);                // in backward, from its start
  t.add(EventKind::phase, "data", 30, 40, 0, Pass::none, "", 7);  // another thread
  const auto p = phase_times(t.events, t.tracer);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].forward_ns, 43);
  EXPECT_EQ(p[0].backward_ns, 40);
  EXPECT_EQ(p[0].optimizer_ns, 17);
  EXPECT_EQ(p[0].data_ns, 10);
  EXPECT_EQ(p[0].other_ns, 0);
  EXPECT_EQ(p[0].forward_ns + p[0].backward_ns + p[0].optimizer_ns, p[0].span_ns());
}

TEST(LayerTimes, OutermostOpsOnlyCountedIterationsModelOrder) {
  Trace t;
  // warm-up iteration 0, excluded
  t.add(EventKind::op, "conv2d", 0, 50, 0, Pass::forward, "layer1.conv");
  // iteration 1: conv2d (100..150) calls pad (100..110) and gemm (110..150): only 50 counts
  t.add(EventKind::op, "conv2d", 100, 150, 1, Pass::forward, "layer1.conv");
  t.add(EventKind::op, "pad", 100, 110, 1, Pass::forward, "layer1.conv");
  t.add(EventKind::op, "gemm", 110, 150, 1, Pass::forward, "layer1.conv");
  t.add(EventKind::op, "relu", 150, 160, 1, Pass::forward, "layer1.relu");
  t.add(EventKind::op, "relu_backward", 200, 215, 1, Pass::backward, "layer1.relu");
  t.add(EventKind::op, "conv2d_backward_data", 215, 260, 1, Pass::backward, "layer1.conv");
  t.add(EventKind::op, "conv2d_backward_weights", 260, 300, 1, Pass::backward, "layer1.conv");
  // another thread at the same time: not nested in thread 0's events
  t.add(EventKind::op, "gemm", 120, 130, 1, Pass::forward, "layer1.relu", 1);
  // an op without layer is left out
  t.add(EventKind::op, "sgd_step", 300, 320, 1, Pass::none, "");

  const auto layers = layer_times(t.events, lookup_in(t.tracer), [](int32_t i) { return i >= 1; });
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].name, "layer1.conv");
  EXPECT_EQ(layers[0].forward_ns, 50);
  EXPECT_EQ(layers[0].backward_ns, 85);
  EXPECT_EQ(layers[0].calls, 3);
  EXPECT_EQ(layers[0].ops, (std::vector<std::string>{"conv2d", "conv2d_backward_data", "conv2d_backward_weights"}));
  EXPECT_EQ(layers[1].name, "layer1.relu");
  EXPECT_EQ(layers[1].forward_ns, 20);
  EXPECT_EQ(layers[1].backward_ns, 15);
  EXPECT_EQ(layers[1].calls, 3);
  EXPECT_EQ(layers[1].ops, (std::vector<std::string>{"gemm", "relu", "relu_backward"}));
}

TEST(OpSummary, SelfTimeStatsSortedByTotal) {
  Trace t;
  // conv2d 100 inclusive with children pad 10 and gemm 40 (gemm calls copy 5) -> self 50
  t.add(EventKind::op, "conv2d", 0, 100, 0);
  t.add(EventKind::op, "pad", 0, 10, 0);
  t.add(EventKind::op, "gemm", 20, 60, 0);
  t.add(EventKind::op, "copy", 30, 35, 0);
  t.add(EventKind::op, "gemm", 100, 120, 0);
  t.add(EventKind::op, "gemm", 120, 150, 0);
  t.add(EventKind::op, "gemm", 150, 1000, 9);     // filtered out
  t.add(EventKind::phase, "forward", 0, 150, 0);  // not an op
  const auto stats = op_summary(t.events, lookup_in(t.tracer), [](int32_t i) { return i != 9; });
  ASSERT_EQ(stats.size(), 4u);
  EXPECT_EQ(stats[0].name, "gemm");  // 35 + 20 + 30 = 85
  EXPECT_EQ(stats[0].count, 3);
  EXPECT_EQ(stats[0].total_ns, 85);
  EXPECT_EQ(stats[0].min_ns, 20);
  EXPECT_EQ(stats[0].max_ns, 35);
  EXPECT_EQ(stats[0].median_ns, 30);
  EXPECT_NEAR(stats[0].mean_ns, 85.0 / 3, 1e-9);
  EXPECT_EQ(stats[1].name, "conv2d");
  EXPECT_EQ(stats[1].total_ns, 50);
  EXPECT_EQ(stats[2].name, "pad");
  EXPECT_EQ(stats[3].name, "copy");
  int64_t sum = 0;
  for (const auto& s : stats) sum += s.total_ns;
  EXPECT_EQ(sum, 150);  // the op time, no double counting
  // Inclusive: each op event's own duration, what it ran included (the filtered one left out).
  EXPECT_EQ(stats[0].inclusive_ns, 40 + 20 + 30);
  EXPECT_EQ(stats[1].inclusive_ns, 100);
  EXPECT_EQ(stats[2].inclusive_ns, 10);
  EXPECT_EQ(stats[3].inclusive_ns, 5);
}

// Rankings by a typical iteration (issue 38): an op or layer whose calls are short but a few of
// them were preempted has a large total and mean and a small median per iteration; an op that
// runs in every iteration for longer ranks above it. Iterations where it did not run count 0.
TEST(OpSummary, MedianPerIterationIsNotInflatedByAFewPreemptedCalls) {
  Trace t;
  for (int32_t i = 0; i < 30; ++i) {
    const int64_t at = 100'000 * i;
    t.add(EventKind::iteration, "iteration", at, at + 90'000, i);
    // "relu": 24 us in most iterations, 4 of 30 preempted for 30 ms
    const int64_t relu = (i % 8 == 3) ? 30'000 : 24;
    t.add(EventKind::op, "relu", at, at + relu, i, Pass::forward, "layer.relu");
    // "conv": 500 us in every iteration
    t.add(EventKind::op, "conv", at + 40'000, at + 40'500, i, Pass::forward, "layer.conv");
    // "rare": 10 us in 5 iterations of 30: its median per iteration is 0
    if (i % 6 == 0) t.add(EventKind::op, "rare", at + 50'000, at + 50'010, i, Pass::backward, "layer.conv");
  }
  const auto stats = op_summary(t.events, lookup_in(t.tracer));
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].name, "relu");  // sorted by total: 4 x 30 ms dominate
  EXPECT_EQ(stats[0].median_per_iteration_ns, 24);
  EXPECT_EQ(stats[1].name, "conv");
  EXPECT_EQ(stats[1].median_per_iteration_ns, 500);
  EXPECT_EQ(stats[2].name, "rare");
  EXPECT_EQ(stats[2].median_per_iteration_ns, 0);
  // Every counted iteration's value, in order: what a comparison tests (schema v8).
  ASSERT_EQ(stats[2].per_iteration_ns.size(), 30u);
  for (int32_t i = 0; i < 30; ++i) EXPECT_EQ(stats[2].per_iteration_ns[i], i % 6 == 0 ? 10 : 0) << i;
  ASSERT_EQ(stats[0].per_iteration_ns.size(), 30u);
  EXPECT_EQ(stats[0].per_iteration_ns[3], 30'000);
  EXPECT_EQ(stats[0].per_iteration_ns[4], 24);
  const auto layers = layer_times(t.events, lookup_in(t.tracer));
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].name, "layer.relu");  // model order
  EXPECT_EQ(layers[0].median_per_iteration_ns, 24);
  EXPECT_EQ(layers[1].median_per_iteration_ns, 500);  // conv's 500 (rare adds 10 in 5 of 30 only)
  ASSERT_EQ(layers[1].per_iteration_ns.size(), 30u);
  EXPECT_EQ(layers[1].per_iteration_ns[0], 510);  // conv and rare, forward and backward
  EXPECT_EQ(layers[1].per_iteration_ns[1], 500);
  EXPECT_EQ(values_over_iterations({{1, 10}, {2, 30}}, {1, 2, 3}), (std::vector<int64_t>{10, 30, 0}));
  EXPECT_EQ(median_over_iterations({{1, 10}, {2, 30}}, {1, 2, 3, 4}), 5);  // 0, 0, 10, 30
  EXPECT_EQ(median_over_iterations({}, {}), 0);
}

TEST(OpSummary, EvenCountMedian) {
  Trace t;
  for (int64_t d : {10, 20, 30, 50}) t.add(EventKind::op, "x", 1000 * d, 1000 * d + d, 0);
  const auto stats = op_summary(t.events, lookup_in(t.tracer));
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].median_ns, 25);
}

TEST(Intervals, MergeUnionIntersection) {
  const std::vector<Interval> a{{5, 10}, {0, 3}, {2, 4}, {10, 12}, {20, 20}, {30, 25}};
  EXPECT_EQ(merge(a), (std::vector<Interval>{{0, 4}, {5, 12}}));
  EXPECT_EQ(union_length(a), 11);
  EXPECT_EQ(union_length({}), 0);
  const std::vector<Interval> b{{3, 6}, {11, 40}};
  EXPECT_EQ(intersection_length(a, b), 1 + 1 + 1);  // [3,4) [5,6) [11,12)
  EXPECT_EQ(intersection_length(a, {}), 0);
  EXPECT_EQ(clip(b, 5, 20), (std::vector<Interval>{{5, 6}, {11, 20}}));
}

TEST(Intervals, BreakdownFollowsDesign) {
  // span [0, 100); compute [0,40) u [30,60) (two streams) = 60; comm [50,80) = 30
  const std::vector<Interval> compute{{0, 40}, {30, 60}};
  const std::vector<Interval> comm{{50, 80}, {-10, 0}};
  const Breakdown b = breakdown(compute, comm, 0, 100);
  EXPECT_EQ(b.span_ns, 100);
  EXPECT_EQ(b.compute_ns, 60);
  EXPECT_EQ(b.comm_ns, 30);
  EXPECT_EQ(b.overlap_ns, 10);
  EXPECT_EQ(b.exposed_comm_ns, 20);
  EXPECT_DOUBLE_EQ(b.overlap_fraction, 10.0 / 30.0);
  EXPECT_EQ(b.idle_ns, 20);

  const Breakdown none = breakdown(compute, {}, 0, 100);
  EXPECT_EQ(none.comm_ns, 0);
  EXPECT_DOUBLE_EQ(none.overlap_fraction, 0.0);
  EXPECT_EQ(none.idle_ns, 40);

  const Breakdown clipped = breakdown(compute, comm, 20, 50);  // inputs clipped to the span
  EXPECT_EQ(clipped.compute_ns, 30);
  EXPECT_EQ(clipped.comm_ns, 0);
  EXPECT_EQ(clipped.idle_ns, 0);
}

}  // namespace
}  // namespace ts::profiler
