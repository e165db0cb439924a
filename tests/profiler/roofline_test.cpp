#include "profiler/roofline.h"

#include <gtest/gtest.h>

#include "profiler/tracer.h"

namespace ts::profiler {
namespace {

struct Trace {
  Tracer tracer;
  std::vector<Event> events;
  Event& add(EventKind kind, std::string_view name, int64_t start, int64_t end, int32_t iteration,
             uint32_t thread = 0) {
    events.push_back(Event{start, end, tracer.intern(name), 0, kind, Pass::none, iteration, thread});
    return events.back();
  }
  Event& op(std::string_view name, int64_t start, int64_t end, int32_t iteration, WorkClass work, int64_t flops,
            int64_t bytes, uint32_t thread = 0) {
    Event& e = add(EventKind::op, name, start, end, iteration, thread);
    e.work = work;
    e.flops = flops;
    e.bytes = bytes;
    return e;
  }
};

// One iteration [0, 100) on one thread: data [0, 10) with a 4 ns copy in it, forward [10, 50),
// backward [50, 90), 10 ns of the loop outside phases.
void one_iteration(Trace& t, int32_t i = 0, int64_t at = 0) {
  t.add(EventKind::iteration, "iteration", at, at + 100, i);
  t.add(EventKind::phase, "data", at, at + 10, i);
  t.op("to_layout", at + 2, at + 6, i, WorkClass::reorder, 0, 64);
  t.add(EventKind::phase, "forward", at + 10, at + 50, i);
  t.op("conv2d", at + 10, at + 30, i, WorkClass::compute, 2000, 300);
  t.op("relu", at + 32, at + 40, i, WorkClass::memory, 0, 80);
  t.add(EventKind::phase, "backward", at + 50, at + 90, i);
  // A node whose work is in the conv pieces nested in it: 2 ns of its own.
  t.op("Conv2dBackward", at + 50, at + 80, i, WorkClass::none, 0, 0);
  t.op("conv2d_backward_data", at + 51, at + 65, i, WorkClass::compute, 1000, 200);
  t.op("conv2d_backward_weights", at + 65, at + 79, i, WorkClass::compute, 1000, 200);
}

TEST(Roofline, SelfTimeFlopsAndBytesByClassAddUpToTheStep) {
  Trace t;
  one_iteration(t);
  const Roofline r = roofline(t.events, lookup_in(t.tracer));
  EXPECT_EQ(r.iterations, 1);
  EXPECT_EQ(r.total_ns, 100);
  EXPECT_EQ(r[WorkClass::compute].self_ns, 20 + 14 + 14);
  EXPECT_EQ(r[WorkClass::compute].flops, 4000);
  EXPECT_EQ(r[WorkClass::compute].bytes, 700);
  EXPECT_EQ(r[WorkClass::compute].calls, 3);
  EXPECT_EQ(r[WorkClass::memory].self_ns, 8);
  EXPECT_EQ(r[WorkClass::memory].bytes, 80);
  EXPECT_EQ(r[WorkClass::reorder].self_ns, 4);
  EXPECT_EQ(r[WorkClass::none].self_ns, 2);  // Conv2dBackward's own, outside its pieces
  EXPECT_EQ(r.data_ns, 6);                   // the data phase minus the copy in it
  EXPECT_EQ(r.work_ns(), 60);
  // The gaps between ops, the loop outside phases and Conv2dBackward's own bookkeeping.
  EXPECT_EQ(r.overhead_ns, 100 - 60 - 6);
}

TEST(Roofline, CountsOnlyCountedIterationsAndOpsInsidePhases) {
  Trace t;
  one_iteration(t, 0, 0);
  one_iteration(t, 1, 1000);
  // An op on a thread with no phases (a communication thread averaging gradients) and one
  // between the phases of the training thread: time, but no phase's.
  t.op("scale", 1052, 1060, 1, WorkClass::memory, 0, 1 << 20, /*thread=*/1);
  t.op("add", 1092, 1095, 1, WorkClass::memory, 0, 1 << 20);
  const Roofline r = roofline(t.events, lookup_in(t.tracer), [](int32_t i) { return i >= 1; });
  EXPECT_EQ(r.iterations, 1);
  EXPECT_EQ(r.total_ns, 100);
  EXPECT_EQ(r[WorkClass::memory].bytes, 80);
  EXPECT_EQ(r[WorkClass::compute].flops, 4000);
  EXPECT_EQ(r.overhead_ns, 34);
}

TEST(Roofline, SeveralTrainingThreadsAddTheirPhases) {
  // Two learners, each with a forward and backward of 40 ns in one iteration of span 50.
  Trace t;
  t.add(EventKind::iteration, "iteration", 0, 50, 0);
  for (uint32_t th : {0u, 1u}) {
    t.add(EventKind::phase, "forward", 5, 25, 0, th);
    t.op("linear", 5, 25, 0, WorkClass::compute, 100, 10, th);
    t.add(EventKind::phase, "backward", 25, 45, 0, th);
    t.op("linear_backward_data", 25, 35, 0, WorkClass::compute, 100, 10, th);
  }
  const Roofline r = roofline(t.events, lookup_in(t.tracer));
  // Each thread's 40 ns of phases, and the 10 ns of the iteration that no thread's phase covers.
  EXPECT_EQ(r.total_ns, 2 * 40 + 10);
  EXPECT_EQ(r[WorkClass::compute].self_ns, 2 * 30);
  EXPECT_EQ(r[WorkClass::compute].flops, 400);
  EXPECT_EQ(r.overhead_ns, 2 * 10 + 10);
}

// A workload's own phases (a3c's learners acting in their games, waiting for the others) are
// the step's too: the policy's ops in acting count, waiting is overhead.
TEST(Roofline, AWorkloadsOwnPhasesAreTheStepsToo) {
  Trace t;
  t.add(EventKind::iteration, "iteration", 0, 100, 0);
  t.add(EventKind::phase, "acting", 0, 40, 0, 1);
  t.op("linear", 10, 20, 0, WorkClass::compute, 100, 10, 1);
  t.add(EventKind::phase, "waiting", 40, 50, 0, 1);
  t.add(EventKind::phase, "backward", 50, 100, 0, 1);
  t.op("linear_backward_data", 50, 90, 0, WorkClass::compute, 200, 10, 1);
  const Roofline r = roofline(t.events, lookup_in(t.tracer));
  EXPECT_EQ(r.total_ns, 100);
  EXPECT_EQ(r[WorkClass::compute].self_ns, 50);
  EXPECT_EQ(r[WorkClass::compute].flops, 300);
  EXPECT_EQ(r.overhead_ns, 50);
}

TEST(Roofline, NoIterationsNoTime) {
  Trace t;
  t.op("conv2d", 0, 10, -1, WorkClass::compute, 10, 10);
  const Roofline r = roofline(t.events, lookup_in(t.tracer));
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(r.total_ns, 0);
  EXPECT_EQ(r.work_ns(), 0);
  EXPECT_EQ(r.overhead_ns, 0);
}

}  // namespace
}  // namespace ts::profiler
