// The GPU half of the recorder with a hand-made CUPTI trace (no GPU needed): activities, the
// per-iteration breakdown (warm-up left out), kernel and copy summaries, per-layer GPU time,
// the tracer's own figures (dropped and incomplete records) and the trace checks as metrics, and
// what `show` prints from them.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/summary.h"
#include "cli_test_util.h"
#include "profiler/tracer.h"
#include "session/record.h"
#include "store/reader.h"
#include "store/writer.h"

using namespace ts;
using namespace ts::testing;

namespace {

int64_t record_run(const std::filesystem::path& db, const workloads::LoopResult& loop,
                   const std::vector<profiler::Event>& events, const profiler::GpuTrace& trace) {
  store::Writer w(db);
  store::RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cuda:0";
  const int64_t run = w.begin_run(info);
  session::RunRecorder rec(w, run);
  rec.set_gpu_trace(trace);
  rec.record(loop, events, nullptr, {}, nullptr, ts::session::RecordScope::everything);
  w.finish_run(run, store::RunStatus::completed, "2026-11-22T00:00:00Z", "");
  return run;
}

std::map<std::string, double> run_metrics(const std::filesystem::path& db, int64_t run) {
  store::Reader r(db);
  std::map<std::string, double> m;
  for (const auto& row : r.metrics(run)) {
    if (row.iteration < 0) m[row.name] = row.value;
  }
  return m;
}

}  // namespace

TEST(RecordGpu, StoresActivitiesBreakdownSummariesAndMetrics) {
  TempDir dir;
  const auto db = dir / "g.db";
  auto& tracer = profiler::Tracer::global();
  const auto id = [&](const char* s) { return tracer.intern(s); };

  workloads::LoopResult loop;
  for (int i = 0; i < 3; ++i) {
    workloads::IterationResult it;
    it.index = i;
    it.warmup = i == 0;
    it.start_ns = 1000 * i;
    // Iteration 2 ends before its copy does: that copy lies outside it (1 of the 9 checked).
    it.end_ns = 1000 * i + (i == 2 ? 550 : 900);
    // The events' device time against CUPTI's window (600 ns, to the copy's end): 0 and 0.2
    // for the timed iterations; the warm-up's would be 5, and is not counted.
    it.device_ns = i == 0 ? 100 : i == 1 ? 600 : 500;
    it.samples = 8;
    loop.iterations.push_back(it);
  }
  std::vector<profiler::Event> events;
  for (int i = 0; i < 3; ++i) {
    events.push_back(
        {1000 * i, 1000 * i + 900, id("iteration"), 0, profiler::EventKind::iteration, profiler::Pass::none, i, 0});
    events.push_back({1000 * i + 10, 1000 * i + 300, id("conv2d"), id("layer1.0.conv1"), profiler::EventKind::op,
                      profiler::Pass::forward, i, 0});
  }

  profiler::GpuTrace trace;
  trace.dropped_records = 0;
  trace.incomplete_records = 3;
  trace.records = 42;
  trace.unattributed_launches = 1;
  for (int i = 0; i < 3; ++i) {
    // Per iteration on cuda:0: a forward kernel [100, 300) and a backward one [350, 400) of
    // layer1.0.conv1, and a copy [500, 600): span 500, busy 350, idle 150.
    profiler::GpuActivity k;
    k.kind = profiler::GpuKind::kernel;
    k.name = id("implicit_gemm");
    k.layer = id("layer1.0.conv1");
    k.op = id("conv2d");
    k.pass = profiler::Pass::forward;
    k.iteration = i;
    k.stream = 7;
    k.start_ns = 1000 * i + 100;
    k.end_ns = 1000 * i + 300;
    k.correlation = 10 + i;
    trace.activities.push_back(k);
    k.pass = profiler::Pass::backward;
    k.start_ns = 1000 * i + 350;
    k.end_ns = 1000 * i + 400;
    k.correlation = 20 + i;
    trace.activities.push_back(k);
    // Their launches: the forward kernel's before it, the backward one's after it (one clock
    // would not allow that): 3 of the 6 checked start before their launch.
    profiler::GpuActivity api;
    api.kind = profiler::GpuKind::api;
    api.name = id("cudaLaunchKernel");
    api.device = -1;
    api.iteration = i;
    api.start_ns = 1000 * i + 50;
    api.end_ns = 1000 * i + 60;
    api.correlation = 10 + i;
    trace.activities.push_back(api);
    api.start_ns = 1000 * i + 360;
    api.end_ns = 1000 * i + 370;
    api.correlation = 20 + i;
    trace.activities.push_back(api);
    profiler::GpuActivity c;
    c.kind = profiler::GpuKind::memcpy;
    c.name = id("memcpy HtoD");
    c.iteration = i;
    c.stream = 7;
    c.bytes = 1000;
    c.start_ns = 1000 * i + 500;
    c.end_ns = 1000 * i + 600;
    trace.activities.push_back(c);
  }

  const int64_t run = record_run(db, loop, events, trace);

  store::Reader r(db);
  EXPECT_EQ(r.gpu_activity_count(run), 15);
  const auto b = r.gpu_breakdown(run);
  ASSERT_EQ(b.size(), 2U);  // the warm-up iteration left out
  EXPECT_EQ(b[0].iteration, 1);
  EXPECT_EQ(b[0].end_ns - b[0].start_ns, 500);
  EXPECT_EQ(b[0].busy_ns, 350);
  EXPECT_EQ(b[0].idle_ns, 150);
  EXPECT_EQ(b[0].memcpy_ns, 100);

  bool kernel_row = false;
  for (const auto& o : r.op_summary(run)) {
    if (o.device == "cuda:0" && o.name == "implicit_gemm") {
      kernel_row = true;
      EXPECT_EQ(o.count, 4);  // two per timed iteration
      EXPECT_EQ(o.total_ns, 500);
    }
  }
  EXPECT_TRUE(kernel_row);
  const auto copies = r.copy_summary(run);
  ASSERT_EQ(copies.size(), 1U);
  EXPECT_EQ(copies[0].bytes, 2000);

  bool layer_row = false;
  for (const auto& l : r.layers(run)) {
    if (l.layer == "layer1.0.conv1") {
      layer_row = true;
      EXPECT_DOUBLE_EQ(l.gpu_forward_ns, 200.0);  // per timed iteration
      EXPECT_DOUBLE_EQ(l.gpu_backward_ns, 50.0);
    }
  }
  EXPECT_TRUE(layer_row);

  const auto m = run_metrics(db, run);
  EXPECT_EQ(m.at("gpu_dropped_records"), 0);
  EXPECT_EQ(m.at("gpu_incomplete_records"), 3);
  EXPECT_EQ(m.at("gpu_unattributed_launches"), 1);
  EXPECT_EQ(m.at("gpu0_span_ns"), 1000);
  EXPECT_EQ(m.at("gpu0_idle_ns"), 300);
  EXPECT_DOUBLE_EQ(m.at("gpu0_busy_fraction"), 0.7);
  EXPECT_DOUBLE_EQ(m.at("gpu_trace_kernels_before_launch"), 0.5);
  EXPECT_DOUBLE_EQ(m.at("gpu_trace_outside_iteration"), 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(m.at("gpu_trace_event_diff_max"), 0.2);
  EXPECT_DOUBLE_EQ(m.at("gpu_trace_event_diff_median"), 0.1);

  const std::string shown = cli::format_summary(cli::run_summary(db, run));
  EXPECT_NE(shown.find("GPU cuda:0"), std::string::npos) << shown;
  EXPECT_NE(shown.find("busy 70.0% of 0.00 ms"), std::string::npos) << shown;
  EXPECT_NE(shown.find("no dropped records, WARNING: 3 records INCOMPLETE"), std::string::npos) << shown;
  EXPECT_NE(shown.find("implicit_gemm"), std::string::npos) << shown;
  EXPECT_NE(shown.find("GPU checks     50% of device work starts before its launch (WARNING: one clock, must be 0); "
                       "11.1% outside its iteration (WARNING); CUPTI against CUDA events per iteration: max 20%, "
                       "median 10%"),
            std::string::npos)
      << shown;
  const std::string layers = cli::format_layers(db, run, 0);
  EXPECT_NE(layers.find("gpu fwd ms"), std::string::npos) << layers;
}

TEST(RecordGpu, ChecksWithNothingToCheckAreLeftOut) {
  TempDir dir;
  const auto db = dir / "g.db";
  auto& tracer = profiler::Tracer::global();
  workloads::LoopResult loop;
  workloads::IterationResult it;  // device_ns stays -1: no CUDA events, no comparison with them
  it.start_ns = 1000;
  it.end_ns = 2000;
  it.samples = 8;
  loop.iterations.push_back(it);
  profiler::GpuTrace trace;
  profiler::GpuActivity k;
  k.kind = profiler::GpuKind::kernel;
  k.name = tracer.intern("implicit_gemm");
  k.iteration = 0;
  k.start_ns = 1100;
  k.end_ns = 1500;
  k.correlation = 3;
  trace.activities.push_back(k);
  profiler::GpuActivity api = k;
  api.kind = profiler::GpuKind::api;
  api.device = -1;
  api.start_ns = 1050;
  api.end_ns = 1060;
  trace.activities.push_back(api);

  const int64_t run = record_run(db, loop, {}, trace);
  const auto m = run_metrics(db, run);
  EXPECT_EQ(m.at("gpu_trace_kernels_before_launch"), 0);
  EXPECT_EQ(m.at("gpu_trace_outside_iteration"), 0);
  EXPECT_FALSE(m.contains("gpu_trace_event_diff_max"));
  EXPECT_FALSE(m.contains("gpu_trace_event_diff_median"));
  const std::string shown = cli::format_summary(cli::run_summary(db, run));
  EXPECT_NE(shown.find("GPU checks     0% of device work starts before its launch; 0% outside its iteration\n"),
            std::string::npos)
      << shown;

  // An empty trace (CUPTI held by another tool) checked nothing: no figure that would read as passed.
  const int64_t empty = record_run(db, loop, {}, profiler::GpuTrace{});
  const auto none = run_metrics(db, empty);
  EXPECT_FALSE(none.contains("gpu_trace_kernels_before_launch"));
  EXPECT_FALSE(none.contains("gpu_trace_outside_iteration"));
  const std::string shown_empty = cli::format_summary(cli::run_summary(db, empty));
  EXPECT_EQ(shown_empty.find("GPU checks"), std::string::npos) << shown_empty;
}
