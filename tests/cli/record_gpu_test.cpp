// The GPU half of the recorder with a hand-made CUPTI trace (no GPU needed): activities, the
// per-iteration breakdown (warm-up left out), kernel and copy summaries, per-layer GPU time,
// the tracer's own figures (dropped and incomplete records) as metrics, and what `show` prints
// from them.
#include <gtest/gtest.h>

#include <map>

#include "session/record.h"
#include "cli/summary.h"
#include "cli_test_util.h"
#include "profiler/tracer.h"
#include "store/reader.h"
#include "store/writer.h"

using namespace ts;
using namespace ts::testing;

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
    it.end_ns = 1000 * i + 900;
    it.samples = 8;
    loop.iterations.push_back(it);
  }
  std::vector<profiler::Event> events;
  for (int i = 0; i < 3; ++i) {
    events.push_back({1000 * i, 1000 * i + 900, id("iteration"), 0, profiler::EventKind::iteration, profiler::Pass::none, i, 0});
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
    trace.activities.push_back(k);
    k.pass = profiler::Pass::backward;
    k.start_ns = 1000 * i + 350;
    k.end_ns = 1000 * i + 400;
    trace.activities.push_back(k);
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

  int64_t run = 0;
  {
    store::Writer w(db);
    store::RunInfo info;
    info.workload = "resnet50";
    info.preset = "tiny";
    info.device = "cuda:0";
    run = w.begin_run(info);
    session::RunRecorder rec(w, run);
    rec.set_gpu_trace(trace);
    rec.record(loop, events, nullptr, {}, nullptr, ts::session::RecordScope::everything);
    w.finish_run(run, store::RunStatus::completed, "2026-11-22T00:00:00Z", "");
  }

  store::Reader r(db);
  EXPECT_EQ(r.gpu_activity_count(run), 9);
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

  std::map<std::string, double> m;
  for (const auto& row : r.metrics(run)) {
    if (row.iteration < 0) m[row.name] = row.value;
  }
  EXPECT_EQ(m.at("gpu_dropped_records"), 0);
  EXPECT_EQ(m.at("gpu_incomplete_records"), 3);
  EXPECT_EQ(m.at("gpu_unattributed_launches"), 1);
  EXPECT_EQ(m.at("gpu0_span_ns"), 1000);
  EXPECT_EQ(m.at("gpu0_idle_ns"), 300);
  EXPECT_DOUBLE_EQ(m.at("gpu0_busy_fraction"), 0.7);

  const std::string shown = cli::format_summary(cli::run_summary(db, run));
  EXPECT_NE(shown.find("GPU cuda:0"), std::string::npos) << shown;
  EXPECT_NE(shown.find("busy 70.0% of 0.00 ms"), std::string::npos) << shown;
  EXPECT_NE(shown.find("no dropped records, WARNING: 3 records INCOMPLETE"), std::string::npos) << shown;
  EXPECT_NE(shown.find("implicit_gemm"), std::string::npos) << shown;
  const std::string layers = cli::format_layers(db, run, 0);
  EXPECT_NE(layers.find("gpu fwd ms"), std::string::npos) << layers;
}
