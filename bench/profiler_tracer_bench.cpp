// Tracer overhead per event: a Range enabled (two clock reads + a buffered record) and
// disabled (one relaxed load), plus the raw record path and a drain.
#include <benchmark/benchmark.h>

#include "profiler/tracer.h"

namespace {

using ts::profiler::Event;
using ts::profiler::EventKind;
using ts::profiler::Pass;
using ts::profiler::Range;
using ts::profiler::Tracer;

void BM_RangeEnabled(benchmark::State& state) {
  Tracer& t = Tracer::global();
  const auto name = t.intern("bench_op");
  const auto layer = t.intern("bench.layer");
  t.clear();
  t.set_enabled(true);
  int64_t n = 0;
  for (auto _ : state) {
    Range r(name, EventKind::op, Pass::forward, layer);
    if (++n == 100'000) {  // as a run that drains every 100k events: chunks are reused
      state.PauseTiming();
      t.clear();
      n = 0;
      state.ResumeTiming();
    }
  }
  t.set_enabled(false);
  t.clear();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RangeEnabled)->Threads(1)->Threads(4);

void BM_RangeDisabled(benchmark::State& state) {
  Tracer& t = Tracer::global();
  const auto name = t.intern("bench_op");
  t.set_enabled(false);
  for (auto _ : state) {
    Range r(name, EventKind::op);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RangeDisabled);

void BM_Record(benchmark::State& state) {
  Tracer t;
  const Event e{1, 2, t.intern("x"), 0, EventKind::op, Pass::none, 0, 0};
  int64_t n = 0;
  for (auto _ : state) {
    t.record(e);
    if (++n == 100'000) {
      state.PauseTiming();
      t.clear();
      n = 0;
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Record);

void BM_Drain(benchmark::State& state) {
  Tracer t;
  const auto n = state.range(0);
  for (auto _ : state) {
    state.PauseTiming();
    for (int64_t i = 0; i < n; ++i) t.record(Event{n - i, n - i + 1, 0, 0, EventKind::op, Pass::none, 0, 0});
    state.ResumeTiming();
    benchmark::DoNotOptimize(t.drain());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Drain)->Arg(100'000);

}  // namespace
BENCHMARK_MAIN();
