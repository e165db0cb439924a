// Ingest throughput of the results store: EventRow and MemoryPoint batches into a fresh database.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "store/writer.h"

namespace fs = std::filesystem;
using namespace ts::store;

namespace {

fs::path fresh_db(const char* tag) {
  const fs::path dir = fs::temp_directory_path() / ("ts_store_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path db = dir / (std::string(tag) + ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
  return db;
}

RunInfo bench_run() {
  RunInfo info;
  info.workload = "bench";
  info.preset = "none";
  info.device = "cpu";
  info.started_at = "2026-01-01T00:00:00Z";
  return info;
}

// n events over 500 distinct names and 500 distinct layers, in start order (as a tracer emits them).
std::vector<EventRow> make_events(int64_t n) {
  std::vector<EventRow> ev;
  ev.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ev.push_back(EventRow{i * 100, i * 100 + 60, "op_" + std::to_string(i % 500),
                          "layer_" + std::to_string((i * 7) % 500), "op", i % 3 ? "forward" : "backward", i / 1000,
                          i % 4});
  return ev;
}

void BM_IngestEvents(benchmark::State& state) {
  const auto events = make_events(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path db = fresh_db("events");
    state.ResumeTiming();
    {
      Writer w(db);  // includes creating the schema, as a real run does
      const int64_t run = w.begin_run(bench_run());
      w.add_events(run, events);
      w.finish_run(run, RunStatus::completed, "2026-01-01T00:00:01Z", "");
    }
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * state.range(0)), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_IngestEvents)->Arg(100'000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_IngestMemoryTimeline(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<MemoryPoint> points;
  points.reserve(static_cast<size_t>(n));
  const char* categories[] = {"parameters", "gradients", "activations", "optimizer", "workspace"};
  for (int64_t i = 0; i < n; ++i) points.push_back(MemoryPoint{i * 50, categories[i % 5], (i % 1000) * 4096});
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path db = fresh_db("memory");
    state.ResumeTiming();
    Writer w(db);
    const int64_t run = w.begin_run(bench_run());
    w.add_memory_timeline(run, points);
  }
  state.counters["points_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_IngestMemoryTimeline)->Arg(100'000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
