#include "profiler/tracer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>

namespace ts::profiler {
namespace {

TEST(Tracer, InternGivesStableIds) {
  Tracer t;
  EXPECT_EQ(t.intern(""), 0u);
  EXPECT_EQ(t.str(0), "");
  const StringId a = t.intern("conv2d");
  const StringId b = t.intern("relu");
  EXPECT_NE(a, b);
  EXPECT_EQ(t.intern(std::string("conv2d")), a);
  EXPECT_EQ(t.str(a), "conv2d");
  EXPECT_EQ(t.str(b), "relu");
  EXPECT_THROW((void)t.str(999), std::out_of_range);
}

TEST(Tracer, InternIsThreadSafe) {
  Tracer t;
  std::vector<std::vector<StringId>> ids(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 500; ++i) ids[static_cast<size_t>(k)].push_back(t.intern("s" + std::to_string(i)));
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 1; k < 4; ++k) EXPECT_EQ(ids[static_cast<size_t>(k)], ids[0]);
  EXPECT_EQ(t.string_count(), 501u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(t.str(ids[0][static_cast<size_t>(i)]), "s" + std::to_string(i));
}

TEST(Tracer, RangeIsNoOpWhenDisabled) {
  Tracer t;
  { Range r(t, t.intern("x"), EventKind::op); }
  EXPECT_EQ(t.recorded_count(), 0u);
  EXPECT_TRUE(t.drain().empty());
}

TEST(Tracer, RangeRecordsWithIterationAndPass) {
  Tracer t;
  t.set_enabled(true);
  t.set_iteration(7);
  const StringId name = t.intern("matmul");
  const StringId layer = t.intern("fc1");
  {
    Range outer(t, t.intern("forward"), EventKind::phase);
    Range r(t, name, EventKind::op, Pass::forward, layer);
  }
  const auto events = t.drain();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, EventKind::phase);  // the enclosing one sorts first
  const Event& e = events[1];
  EXPECT_EQ(e.name, name);
  EXPECT_EQ(e.layer, layer);
  EXPECT_EQ(e.kind, EventKind::op);
  EXPECT_EQ(e.pass, Pass::forward);
  EXPECT_EQ(e.iteration, 7);
  EXPECT_LE(e.start_ns, e.end_ns);
  EXPECT_LE(events[0].start_ns, e.start_ns);
  EXPECT_GE(events[0].end_ns, e.end_ns);
}

// The GPU profiler's hook sees each range open and close, nested, with its layer, pass and
// iteration; and nothing while the tracer is disabled or after the observer is unset.
TEST(Tracer, RangeObserverSeesNestedRanges) {
  struct Log : RangeObserver {
    std::vector<std::string> lines;
    void begin(EventKind kind, StringId name, StringId layer, Pass pass, int32_t iteration) override {
      lines.push_back("+" + std::string(to_string(kind)) + " " + std::to_string(name) + " " + std::to_string(layer) +
                      " " + std::string(to_string(pass)) + " " + std::to_string(iteration));
    }
    void end(EventKind kind) override { lines.push_back("-" + std::string(to_string(kind))); }
  } log;
  Tracer t;
  const StringId phase = t.intern("forward");
  const StringId op = t.intern("conv2d");
  const StringId layer = t.intern("layer1.0.conv1");
  { Range r(t, phase, EventKind::phase); }  // no observer yet
  set_range_observer(&log);
  { Range r(t, phase, EventKind::phase); }  // disabled tracer
  t.set_enabled(true);
  t.set_iteration(3);
  {
    Range r(t, phase, EventKind::phase);
    Range o(t, op, EventKind::op, Pass::forward, layer);
  }
  set_range_observer(nullptr);
  { Range r(t, phase, EventKind::phase); }
  const std::vector<std::string> want = {"+phase " + std::to_string(phase) + " 0 none 3",
                                         "+op " + std::to_string(op) + " " + std::to_string(layer) + " forward 3",
                                         "-op", "-phase"};
  EXPECT_EQ(log.lines, want);
}

TEST(Tracer, RecordStampsIterationRecordRawKeepsIt) {
  Tracer t;
  t.set_iteration(3);
  t.record(Event{10, 20, 0, 0, EventKind::marker, Pass::none, 99, 0});
  t.record_raw(Event{5, 6, 0, 0, EventKind::marker, Pass::none, 42, 0});
  const auto events = t.drain();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].iteration, 42);
  EXPECT_EQ(events[1].iteration, 3);
}

TEST(Tracer, ManyThreadsManyChunksDrainSortedAndComplete) {
  Tracer t;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10'000;  // more than one chunk each
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < kPerThread; ++i) {
        t.record_raw(Event{int64_t{i} * 10 + k, int64_t{i} * 10 + k + 1, 0, 0, EventKind::op, Pass::none, k, 0});
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.recorded_count(), uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(t.thread_count(), size_t{kThreads});
  const auto events = t.drain();
  ASSERT_EQ(events.size(), size_t{kThreads} * kPerThread);
  EXPECT_TRUE(std::is_sorted(events.begin(), events.end(),
                             [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; }));
  // Each writer thread got one small id, and all of its events carry it.
  std::vector<std::set<uint32_t>> ids(kThreads);
  for (const Event& e : events) ids[static_cast<size_t>(e.iteration)].insert(e.thread);
  std::set<uint32_t> all;
  for (const auto& s : ids) {
    EXPECT_EQ(s.size(), 1u);
    all.insert(*s.begin());
  }
  EXPECT_EQ(all.size(), size_t{kThreads});
  EXPECT_LT(*all.rbegin(), uint32_t{kThreads});
  EXPECT_TRUE(t.drain().empty());
  EXPECT_EQ(t.recorded_count(), uint64_t{kThreads} * kPerThread);  // drained ones still counted
  t.clear();
  EXPECT_EQ(t.recorded_count(), 0u);
}

TEST(Tracer, DrainWhileRecordingLosesNothing) {
  Tracer t;
  constexpr int kThreads = 3;
  constexpr int64_t kPerThread = 200'000;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&] {
      for (int64_t i = 0; i < kPerThread; ++i) t.record(Event{i, i + 1, 0, 0, EventKind::op, Pass::none, 0, 0});
      done.fetch_add(1);
    });
  }
  size_t drained = 0;
  while (done.load() < kThreads) drained += t.drain().size();
  for (auto& th : threads) th.join();
  drained += t.drain().size();
  EXPECT_EQ(drained, size_t{kThreads} * kPerThread);
  EXPECT_EQ(t.recorded_count(), uint64_t{kThreads} * kPerThread);
}

TEST(Tracer, ClearDropsBufferedEventsKeepsStrings) {
  Tracer t;
  const StringId id = t.intern("keep");
  t.record(Event{1, 2, id, 0, EventKind::marker, Pass::none, 0, 0});
  t.clear();
  EXPECT_TRUE(t.drain().empty());
  EXPECT_EQ(t.str(id), "keep");
}

TEST(Tracer, GlobalIsOneInstanceAndRangeUsesIt) {
  Tracer& g = Tracer::global();
  EXPECT_EQ(&g, &Tracer::global());
  g.clear();
  g.set_enabled(true);
  { Range r(g.intern("global-range"), EventKind::marker); }
  g.set_enabled(false);
  { Range r(g.intern("global-range"), EventKind::marker); }
  const auto events = g.drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(g.str(events[0].name), "global-range");
}

TEST(Event, ToString) {
  EXPECT_EQ(to_string(EventKind::iteration), "iteration");
  EXPECT_EQ(to_string(EventKind::op), "op");
  EXPECT_EQ(to_string(Pass::backward), "backward");
  EXPECT_EQ(to_string(Pass::none), "none");
}

}  // namespace
}  // namespace ts::profiler
