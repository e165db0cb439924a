// Writes a run with a hand-made GPU trace into a db, through the real recorder (so the stored
// breakdown is trainscope's own): the input of tests/reports/hta_crosscheck.py, which exports
// it as a Chrome trace, runs Holistic Trace Analysis on that, and compares.
//   gpu_trace_fixture DB
// Five iterations; the last has no GPU work (HTA leaves out the last step it sees). Each of
// the others: two compute streams overlapping, an NCCL kernel overlapping them, a copy after
// a gap, each launched by an API call on the CPU; iteration i's shapes shift with i.
#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "profiler/tracer.h"
#include "session/record.h"
#include "store/writer.h"

using namespace ts;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gpu_trace_fixture DB\n");
    return 2;
  }
  try {
    auto& tracer = profiler::Tracer::global();
    const auto id = [&](const std::string& s) { return tracer.intern(s); };
    workloads::LoopResult loop;
    std::vector<profiler::Event> events;
    profiler::GpuTrace trace;
    uint32_t correlation = 1;
    for (int32_t i = 0; i < 5; ++i) {
      const int64_t base = 1'000'000 * (i + 1);
      workloads::IterationResult it;
      it.index = i;
      it.start_ns = base;
      it.end_ns = base + 900'000;
      it.samples = 8;
      loop.iterations.push_back(it);
      events.push_back(
          {base, base + 900'000, id("iteration"), 0, profiler::EventKind::iteration, profiler::Pass::none, i, 0});
      if (i == 4) break;
      const int64_t s = 1000 * i;  // each iteration a little different
      struct K {
        profiler::GpuKind kind;
        const char* name;
        uint32_t stream;
        int64_t start, end;
      };
      const K kernels[] = {
          {profiler::GpuKind::kernel, "sm90_gemm_f32", 7, 100'000, 300'000 + s},
          {profiler::GpuKind::kernel, "relu_kernel", 8, 150'000, 320'000},
          {profiler::GpuKind::comm, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 9, 250'000, 350'000 + 2 * s},
          {profiler::GpuKind::memcpy, "Memcpy HtoD", 7, 500'000, 600'000 - s},
      };
      int64_t launch = base + 10'000;
      for (const K& k : kernels) {
        profiler::GpuActivity api;
        api.kind = profiler::GpuKind::api;
        api.name = id("cudaLaunchKernel");
        api.device = -1;
        api.stream = 4242;
        api.start_ns = launch;
        api.end_ns = launch + 2'000;
        api.correlation = correlation;
        api.iteration = i;
        trace.activities.push_back(api);
        profiler::GpuActivity a;
        a.kind = k.kind;
        a.name = id(k.name);
        a.stream = k.stream;
        a.start_ns = base + k.start;
        a.end_ns = base + k.end;
        a.correlation = correlation++;
        a.iteration = i;
        if (k.kind == profiler::GpuKind::memcpy) a.bytes = 1 << 20;
        trace.activities.push_back(a);
        launch += 5'000;
      }
    }
    store::Writer w(argv[1]);
    store::RunInfo info;
    info.workload = "fixture";
    info.preset = "tiny";
    info.device = "cuda:0";
    const int64_t run = w.begin_run(info);
    session::RunRecorder rec(w, run);
    rec.set_gpu_trace(std::move(trace));
    rec.record(loop, events, nullptr, {}, nullptr, ts::session::RecordScope::everything);
    w.finish_run(run, store::RunStatus::completed, "2026-11-22T00:00:00Z", "");
    fmt::print("{}\n", run);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_trace_fixture: %s\n", e.what());
    return 1;
  }
}
