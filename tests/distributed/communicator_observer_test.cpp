// Every collective is a communication range for the range observer (what the GPU profiler uses
// to count what a collective launches as communication), on one rank with a communicator whose
// collectives do nothing, or throw.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "profiler/range_observer.h"
#include "profiler/tracer.h"

using namespace ts;
using namespace ts::distributed;

namespace {

struct Seen {
  bool begin = false;
  profiler::EventKind kind = profiler::EventKind::marker;
  std::string name, layer;
  profiler::Pass pass = profiler::Pass::forward;
  int32_t iteration = 0;
};

class RecordingObserver final : public profiler::RangeObserver {
 public:
  void begin(profiler::EventKind kind, profiler::StringId name, profiler::StringId layer, profiler::Pass pass,
             int32_t iteration) override {
    auto& tracer = profiler::Tracer::global();
    seen.push_back({true, kind, std::string(tracer.str(name)), std::string(tracer.str(layer)), pass, iteration});
  }
  void end(profiler::EventKind kind) override { seen.push_back({false, kind, "", "", profiler::Pass::none, 0}); }
  std::vector<Seen> seen;
};

// One rank; each collective notes how many observer calls had been made when it ran.
class LoneCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view backend() const override { return "test"; }
  RecordingObserver* observer = nullptr;
  size_t seen_when_called = 0;
  bool fail = false;

 protected:
  void do_all_reduce(void*, size_t, DataType, ReduceOp) override { called(); }
  void do_broadcast(void*, size_t, DataType, int) override { called(); }
  void do_all_gather(const void*, void*, size_t, DataType) override { called(); }
  void do_reduce_scatter(const void*, void*, size_t, DataType, ReduceOp) override { called(); }
  void do_barrier() override { called(); }

 private:
  void called() {
    seen_when_called = observer != nullptr ? observer->seen.size() : 0;
    if (fail) throw std::runtime_error("lost a rank");
  }
};

// Enables the global tracer and sets the observer for one test; leaves both as they were.
class TracedCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& tracer = profiler::Tracer::global();
    was_enabled_ = tracer.enabled();
    was_iteration_ = tracer.iteration();
    tracer.set_enabled(true);
    tracer.set_iteration(7);
    profiler::set_range_observer(&observer_);
    comm_.observer = &observer_;
  }
  void TearDown() override {
    profiler::set_range_observer(nullptr);
    auto& tracer = profiler::Tracer::global();
    tracer.set_iteration(was_iteration_);
    tracer.set_enabled(was_enabled_);
    tracer.clear();
  }
  RecordingObserver observer_;
  LoneCommunicator comm_;

 private:
  bool was_enabled_ = false;
  int32_t was_iteration_ = -1;
};

}  // namespace

TEST_F(TracedCollectives, EachCallIsACommunicationRangeAroundTheCollective) {
  float x = 1.0f;
  comm_.all_reduce(&x, 1, DataType::f32, ReduceOp::sum, "bucket 0.1");
  ASSERT_EQ(observer_.seen.size(), 2U);
  EXPECT_EQ(comm_.seen_when_called, 1U);  // the collective ran inside the range
  const Seen& b = observer_.seen[0];
  EXPECT_TRUE(b.begin);
  EXPECT_EQ(b.kind, profiler::EventKind::comm);
  EXPECT_EQ(b.name, "all_reduce");
  EXPECT_EQ(b.layer, "bucket 0.1");
  EXPECT_EQ(b.pass, profiler::Pass::none);
  EXPECT_EQ(b.iteration, 7);
  EXPECT_FALSE(observer_.seen[1].begin);
  EXPECT_EQ(observer_.seen[1].kind, profiler::EventKind::comm);

  comm_.barrier("stop flag");
  ASSERT_EQ(observer_.seen.size(), 4U);
  EXPECT_EQ(observer_.seen[2].name, "barrier");
  EXPECT_EQ(comm_.seen_when_called, 3U);
  // What the calls record is as before: one record each.
  EXPECT_EQ(comm_.take_records().size(), 2U);
}

TEST_F(TracedCollectives, ACallThatThrowsStillClosesItsRange) {
  comm_.fail = true;
  float x = 1.0f;
  EXPECT_THROW(comm_.broadcast(&x, 1, DataType::f32, 0, "parameters"), std::runtime_error);
  ASSERT_EQ(observer_.seen.size(), 2U);
  EXPECT_TRUE(observer_.seen[0].begin);
  EXPECT_FALSE(observer_.seen[1].begin);
  EXPECT_TRUE(comm_.take_records().empty());  // no measurement, as before
}

TEST_F(TracedCollectives, NoObserverCallWhenTheTracerIsOff) {
  profiler::Tracer::global().set_enabled(false);
  float x = 1.0f;
  comm_.all_reduce(&x, 1, DataType::f32, ReduceOp::sum, "bucket 0.0");
  EXPECT_TRUE(observer_.seen.empty());
  EXPECT_EQ(comm_.take_records().size(), 1U);
}

TEST_F(TracedCollectives, TheObserverToldOfTheBeginIsToldOfTheEnd) {
  // The observer is unset while the call runs (the GPU tracer stopping): its end still reaches it.
  class Unsetting final : public Communicator {
   public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    std::string_view backend() const override { return "test"; }

   protected:
    void do_all_reduce(void*, size_t, DataType, ReduceOp) override { profiler::set_range_observer(nullptr); }
    void do_broadcast(void*, size_t, DataType, int) override {}
    void do_all_gather(const void*, void*, size_t, DataType) override {}
    void do_reduce_scatter(const void*, void*, size_t, DataType, ReduceOp) override {}
    void do_barrier() override {}
  } comm;
  float x = 1.0f;
  comm.all_reduce(&x, 1, DataType::f32, ReduceOp::sum, "bucket 0.0");
  ASSERT_EQ(observer_.seen.size(), 2U);
  EXPECT_FALSE(observer_.seen[1].begin);
  comm.barrier("after");  // no observer now: nothing more
  EXPECT_EQ(observer_.seen.size(), 2U);
}
