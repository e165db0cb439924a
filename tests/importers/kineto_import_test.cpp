// importers/kineto_import.h: a PyTorch profiler trace read into the store as a run. A hand-made
// trace of two steps whose every figure is worked out below; a trace cut short leaves nothing.
#include "importers/kineto_import.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <string>

#include "importers/pytorch_memory_timeline.h"
#include "importers/trace_records.h"
#include "store/reader.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::importers;

namespace {

// Times in microseconds from 1000 (the trace's first event): step 5 on the CPU [1000, 1100],
// step 6 [1100, 1200].
// - step 5: gemm [1020, 1050] (launched at 1015) and a copy [1105, 1115] launched at 1016, in
//   step 5 though it runs in step 6's CPU range: the GPU's span is [1020, 1115] = 95 us, compute
//   30, memcpy 10, busy 40, idle 55.
// - step 6: an NCCL all-reduce [1200, 1240] (launched at 1190) and a gemm [1210, 1230]: span 40,
//   compute 20, comm 40, overlap 20, exposed 20, busy 40, idle 0.
const std::string kTrace = R"json({"baseTimeNanoseconds": 1700000000000000000, "traceEvents": [
 {"ph":"X","cat":"user_annotation","name":"ProfilerStep#5","pid":1,"tid":1,"ts":1000,"dur":100},
 {"ph":"X","cat":"user_annotation","name":"ProfilerStep#6","pid":1,"tid":1,"ts":1100,"dur":100},
 {"ph":"X","cat":"python_function","name":"train.py(12): step","pid":1,"tid":1,"ts":1001,"dur":1},
 {"ph":"X","cat":"user_annotation","name":"forward","pid":1,"tid":1,"ts":1005,"dur":50},
 {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1010,"dur":20,"args":{"External id":3}},
 {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1110,"dur":20,"args":{"External id":9}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1015,"dur":5,"args":{"correlation":1}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaMemcpyAsync","pid":1,"tid":1,"ts":1016,"dur":2,"args":{"correlation":4}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1115,"dur":5,"args":{"correlation":2}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1190,"dur":2,"args":{"correlation":3}},
 {"ph":"X","cat":"kernel","name":"sgemm_128x64","pid":0,"tid":7,"ts":1020,"dur":30,"args":{"device":0,"stream":7,"correlation":1}},
 {"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pinned -> Device)","pid":0,"tid":7,"ts":1105,"dur":10,"args":{"device":0,"stream":7,"correlation":4,"bytes":4096}},
 {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)","pid":0,"tid":9,"ts":1200,"dur":40,"args":{"device":0,"stream":9,"correlation":3}},
 {"ph":"X","cat":"kernel","name":"sgemm_128x64","pid":0,"tid":7,"ts":1210,"dur":20,"args":{"device":0,"stream":7,"correlation":2}},
 {"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":1012,"s":"t","args":{"Total Allocated":1000,"Total Reserved":2048,"Bytes":1000,"Device Type":1,"Device Id":0}},
 {"ph":"f","cat":"ac2g","name":"ac2g","id":1,"pid":0,"tid":7,"ts":1020,"bp":"e"},
 {"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"python main"}}
]})json";

fs::path write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST(KinetoImport, ATwoStepTraceBecomesARunWithItsIterationsEventsAndGpuBreakdown) {
  ts::testing::ScratchDir dir("ts_kineto_import");
  const fs::path db = dir / "i.db";
  ImportOptions options;
  options.batch_size = 32;
  options.batch = 3;  // several batches, as a large file gives
  const ImportedRun imported = import_kineto_trace(write(dir / "train_step.json", kTrace), db, options);
  EXPECT_EQ(imported.device, "cuda");
  EXPECT_EQ(imported.iterations, 2);
  EXPECT_EQ(imported.cpu_events, 5);      // 2 steps, 2 ops, 1 phase
  EXPECT_EQ(imported.gpu_activities, 8);  // 4 API calls, 3 kernels, 1 copy
  EXPECT_EQ(imported.memory_samples, 1);
  EXPECT_EQ(imported.left_out, 3);  // the Python frame, the flow, the thread's name

  ts::store::Reader r(db);
  const auto run = r.run(imported.run_id);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->framework, "pytorch");
  EXPECT_EQ(run->workload, "train_step");
  EXPECT_EQ(run->device, "cuda");
  EXPECT_EQ(run->status, ts::store::RunStatus::completed);
  EXPECT_EQ(run->started_at, "2023-11-14T22:13:20Z");  // baseTimeNanoseconds

  const auto iterations = r.iterations(imported.run_id);
  ASSERT_EQ(iterations.size(), 2u);
  EXPECT_EQ(iterations[0].index, 5);
  EXPECT_EQ(iterations[0].start_ns, 0);
  EXPECT_EQ(iterations[0].end_ns, 100'000);
  EXPECT_EQ(iterations[1].index, 6);
  EXPECT_EQ(iterations[1].samples, 32);

  int ops = 0, phases = 0, steps = 0;
  for (const auto& e : r.events(imported.run_id)) {
    ops += e.kind == "op";
    phases += e.kind == "phase";
    steps += e.kind == "iteration";
    if (e.kind == "op") {
      EXPECT_EQ(e.iteration, e.start_ns < 100'000 ? 5 : 6) << e.start_ns;
    }
  }
  EXPECT_EQ(ops, 2);
  EXPECT_EQ(phases, 1);
  EXPECT_EQ(steps, 2);

  for (const auto& a : r.gpu_activities(imported.run_id)) {
    if (a.kind == "memcpy") {
      EXPECT_EQ(a.iteration, 5) << "by its launch, not by when it ran";
      EXPECT_EQ(a.bytes, 4096);
    }
    if (a.name.starts_with("nccl")) {
      EXPECT_EQ(a.kind, "comm");
    }
    if (a.kind == "api") {
      EXPECT_EQ(a.device, -1);
    }
  }

  const auto breakdown = r.gpu_breakdown(imported.run_id);
  ASSERT_EQ(breakdown.size(), 2u);
  const auto& five = breakdown[0];
  EXPECT_EQ(five.iteration, 5);
  EXPECT_EQ(five.end_ns - five.start_ns, 95'000);
  EXPECT_EQ(five.compute_ns, 30'000);
  EXPECT_EQ(five.memcpy_ns, 10'000);
  EXPECT_EQ(five.comm_ns, 0);
  EXPECT_EQ(five.busy_ns, 40'000);
  EXPECT_EQ(five.idle_ns, 55'000);
  const auto& six = breakdown[1];
  EXPECT_EQ(six.iteration, 6);
  EXPECT_EQ(six.compute_ns, 20'000);
  EXPECT_EQ(six.comm_ns, 40'000);
  EXPECT_EQ(six.overlap_ns, 20'000);
  EXPECT_EQ(six.exposed_comm_ns, 20'000);
  EXPECT_EQ(six.idle_ns, 0);

  const auto memory = r.samples(imported.run_id);
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory[0].name, "allocated_bytes:cuda:0");
  EXPECT_EQ(memory[0].value, 1000);
  EXPECT_EQ(memory[0].t_ns, 12'000);
  std::string absent, thread;
  for (const auto& e : r.environment(imported.run_id)) {
    if (e.key == "absent") absent = e.value;
    if (e.key == "thread_0") thread = e.value;
  }
  EXPECT_NE(absent.find("loss"), std::string::npos) << absent;
  EXPECT_EQ(absent.find("GPU activities"), std::string::npos) << "the trace has them: " << absent;
  EXPECT_EQ(thread, "1/1 python main");
}

TEST(KinetoImport, ATraceThatCannotBeReadLeavesNothingInTheDb) {
  ts::testing::ScratchDir dir("ts_kineto_import");
  const fs::path db = dir / "i.db";
  EXPECT_THROW(import_kineto_trace(write(dir / "cut.json", kTrace.substr(0, kTrace.size() - 200)), db, {}), TraceError);
  EXPECT_FALSE(fs::exists(db)) << "the first pass found it cut short: nothing was begun";
  // A CPU-only trace without steps says what it lacks.
  const auto cpu = import_kineto_trace(
      write(dir / "cpu.json", R"([{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":2,"ts":5,"dur":1}])"), db,
      {});
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.iterations, 0);
  std::string absent;
  for (const auto& e : ts::store::Reader(db).environment(cpu.run_id))
    if (e.key == "absent") absent = e.value;
  EXPECT_NE(absent.find("iterations (no ProfilerStep"), std::string::npos) << absent;
  EXPECT_NE(absent.find("GPU activities"), std::string::npos) << absent;
  EXPECT_NE(absent.find("memory"), std::string::npos) << absent;
}

namespace {

// Three steps of a CPU-only training step, step k over [100k, 100k + 100] us (times from 0):
//   forward [b, b+40]: layer fc1 [b+1, b+21] holds aten::linear [b+2, b+20] (sequence 10k+1) and
//     inside it aten::addmm [b+4, b+18] (10k+2); layer relu [b+22, b+30] holds aten::relu
//     [b+23, b+28] (10k+3); aten::sum [b+31, b+35] (10k+4) is in no layer.
//   backward [b+45, b+85]: the autograd nodes of those ops, carrying their sequence numbers:
//     SumBackward0 [b+46, b+50] (10k+4: no layer), ReluBackward0 [b+51, b+60] (relu),
//     AddmmBackward0 [b+61, b+80] (fc1) with aten::mm [b+62, b+75] inside it.
//   optimizer [b+90, b+98]: PyTorch's own Optimizer.step#SGD.step range [b+91, b+96] (framework
//     work: an op, not a phase) holds aten::add_ [b+91, b+95].
std::string layered_trace() {
  std::string events;
  const auto add = [&](const std::string& cat, const std::string& name, int ts, int dur, int sequence = -1) {
    events += fmt::format(R"({}{{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":1,"ts":{},"dur":{}{}}})",
                          events.empty() ? "" : ",\n", cat, name, ts, dur,
                          sequence < 0 ? "" : fmt::format(R"(,"args":{{"Sequence number":{}}})", sequence));
  };
  for (int k = 0; k < 3; ++k) {
    const int b = 100 * k, q = 10 * k;
    add("user_annotation", fmt::format("ProfilerStep#{}", k), b, 100);
    add("user_annotation", "forward", b, 40);
    add("user_annotation", "layer: fc1", b + 1, 20);
    add("cpu_op", "aten::linear", b + 2, 18, q + 1);
    add("cpu_op", "aten::addmm", b + 4, 14, q + 2);
    add("user_annotation", "layer: relu", b + 22, 8);
    add("cpu_op", "aten::relu", b + 23, 5, q + 3);
    add("cpu_op", "aten::sum", b + 31, 4, q + 4);
    add("user_annotation", "backward", b + 45, 40);
    add("cpu_op", "autograd::engine::evaluate_function: SumBackward0", b + 46, 4, q + 4);
    add("cpu_op", "autograd::engine::evaluate_function: ReluBackward0", b + 51, 9, q + 3);
    add("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", b + 61, 19, q + 2);
    add("cpu_op", "aten::mm", b + 62, 13);
    add("user_annotation", "optimizer", b + 90, 8);
    add("user_annotation", "Optimizer.step#SGD.step", b + 91, 5);
    add("cpu_op", "aten::add_", b + 91, 4);
  }
  return "[" + events + "]";
}

}  // namespace

TEST(KinetoImport, LayersPassesOpSummaryAndRatesOfTheTimedSteps) {
  ts::testing::ScratchDir dir("ts_kineto_import");
  const fs::path db = dir / "i.db";
  ImportOptions options;
  options.warmup_steps = 1;
  options.steps = {{8, 100, 3.0}, {8, 200, 2.0}, {8, 300, 1.0}};
  options.units = {"sentence pairs", "tokens", true};
  options.parameter_count = 1234;
  options.environment = {{"torch_version", "9.9"}};
  options.batch = 7;
  const ImportedRun imported = import_kineto_trace(write(dir / "layered.json", layered_trace()), db, options);
  EXPECT_EQ(imported.iterations, 3);
  EXPECT_EQ(imported.layers, 2);
  EXPECT_EQ(imported.left_out, 6) << "the layers' own ranges: their ops carry them";

  ts::store::Reader r(db);
  const auto run = r.run(imported.run_id);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->warmup, 1);
  EXPECT_EQ(run->iterations, 2);
  EXPECT_EQ(run->parameter_count, 1234);
  const auto iterations = r.iterations(imported.run_id);
  ASSERT_EQ(iterations.size(), 3u);
  EXPECT_TRUE(iterations[0].warmup);
  EXPECT_FALSE(iterations[1].warmup);
  EXPECT_EQ(iterations[2].samples, 8);
  EXPECT_EQ(iterations[2].loss, 1.0);

  // Per timed step (steps 1 and 2): fc1 forward is aten::linear's 18 us (addmm inside it), its
  // backward AddmmBackward0's 19 us; relu 5 and 9; two outermost ops each; model order.
  const auto layers = r.layers(imported.run_id);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].layer, "fc1");
  EXPECT_EQ(layers[0].forward_ns, 18'000);
  EXPECT_EQ(layers[0].backward_ns, 19'000);
  EXPECT_EQ(layers[0].calls, 2);
  EXPECT_EQ(layers[0].op_types, "aten::linear,autograd::engine::evaluate_function: AddmmBackward0");
  EXPECT_EQ(layers[0].per_iteration_ns, (std::vector<int64_t>{37'000, 37'000}));
  EXPECT_EQ(layers[1].layer, "relu");
  EXPECT_EQ(layers[1].forward_ns, 5'000);
  EXPECT_EQ(layers[1].backward_ns, 9'000);

  // Self time over the timed steps: aten::linear 18 - 14 = 4 us a call, AddmmBackward0 19 - 13.
  std::map<std::string, ts::store::OpSummaryRow> ops;
  for (const auto& o : r.op_summary(imported.run_id)) ops[o.name] = o;
  ASSERT_TRUE(ops.contains("aten::linear"));
  EXPECT_EQ(ops["aten::linear"].count, 2);
  EXPECT_EQ(ops["aten::linear"].total_ns, 8'000);
  EXPECT_EQ(ops["aten::linear"].inclusive_ns, 36'000);
  EXPECT_EQ(ops["autograd::engine::evaluate_function: AddmmBackward0"].total_ns, 12'000);
  EXPECT_EQ(ops["aten::mm"].total_ns, 26'000);
  EXPECT_EQ(ops["aten::add_"].count, 2);
  EXPECT_EQ(ops["Optimizer.step#SGD.step"].total_ns, 2'000) << "5 us less the 4 of the add_ it holds, twice";

  // Passes and layers on the events: the backward node found its layer by its sequence number,
  // what ran inside it took its pass; the sum's node had no layer to find.
  std::map<std::string, std::pair<std::string, std::string>> seen;  // name -> (layer, pass), step 1
  int phases = 0;
  for (const auto& e : r.events(imported.run_id)) {
    if (e.iteration == 1 && e.kind == "op") seen[e.name] = {e.layer, e.pass};
    phases += e.kind == "phase";
  }
  EXPECT_EQ(phases, 9);
  EXPECT_EQ(seen["aten::addmm"], std::make_pair(std::string("fc1"), std::string("forward")));
  EXPECT_EQ(seen["aten::sum"], std::make_pair(std::string(""), std::string("forward")));
  EXPECT_EQ(seen["autograd::engine::evaluate_function: ReluBackward0"],
            std::make_pair(std::string("relu"), std::string("backward")));
  EXPECT_EQ(seen["autograd::engine::evaluate_function: SumBackward0"],
            std::make_pair(std::string(""), std::string("backward")));
  EXPECT_EQ(seen["aten::mm"], std::make_pair(std::string(""), std::string("backward")));
  EXPECT_EQ(seen["aten::add_"], std::make_pair(std::string(""), std::string("none")));
  EXPECT_EQ(r.phases(imported.run_id).size(), 9u);

  // Rates over the two timed steps of 100 us: 16 pairs / 200 us, 500 tokens / 200 us (the headline).
  std::map<std::string, ts::store::MetricRow> m;
  for (const auto& row : r.metrics(imported.run_id))
    if (row.iteration < 0) m[row.name] = row;
  EXPECT_DOUBLE_EQ(m["throughput"].value, 80'000);
  EXPECT_EQ(m["throughput"].unit, "sentence pairs/s");
  EXPECT_DOUBLE_EQ(m["tokens_per_s"].value, 2.5e6);
  EXPECT_DOUBLE_EQ(m["headline_throughput"].value, 2.5e6);
  EXPECT_EQ(m["headline_throughput"].unit, "tokens/s");
  EXPECT_DOUBLE_EQ(m["timed_iterations"].value, 2);
  EXPECT_DOUBLE_EQ(m["iteration_time_median"].value, 0.1);
  std::string absent, torch;
  for (const auto& e : r.environment(imported.run_id)) {
    if (e.key == "absent") absent = e.value;
    if (e.key == "torch_version") torch = e.value;
  }
  EXPECT_EQ(torch, "9.9");
  EXPECT_EQ(absent.find("loss"), std::string::npos) << "the steps' losses were given: " << absent;
  EXPECT_EQ(absent.find("layers ("), std::string::npos) << absent;
}

TEST(KinetoImport, WithoutEverySamplesCountNoRateIsMadeUp) {
  ts::testing::ScratchDir dir("ts_kineto_import");
  const fs::path db = dir / "i.db";
  const ImportedRun imported = import_kineto_trace(write(dir / "layered.json", layered_trace()), db, {});
  for (const auto& row : ts::store::Reader(db).metrics(imported.run_id)) {
    EXPECT_FALSE(row.name.starts_with("throughput") || row.name == "headline_throughput") << row.name;
  }
  std::string absent;
  for (const auto& e : ts::store::Reader(db).environment(imported.run_id))
    if (e.key == "absent") absent = e.value;
  EXPECT_NE(absent.find("throughput (the samples per step were not given"), std::string::npos) << absent;
}

// PyTorch's memory timeline (export_memory_timeline's [times, sizes]; each sizes entry: an unused
// 0, then PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY, ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, None).
// Totals: 108 at 0 us, 177 at 10 us (the peak), 168 at 20 us.
const char* const kMemoryTimeline =
    "[[0, 10, 20], [[0, 100, 0, 8, 0, 0, 0, 0, 0], [0, 100, 0, 8, 16, 50, 0, 0, 3], [0, 100, 40, 8, 0, 0, 20, 0, 0]]]";

TEST(KinetoImport, PyTorchsMemoryCategoriesAreReadIntoTrainscopesAndTheirPeakIsPyTorchsTotal) {
  ts::testing::ScratchDir dir("ts_kineto_import");
  const fs::path db = dir / "i.db";
  ImportOptions options;
  options.memory_timeline = write(dir / "memory.json", kMemoryTimeline);
  const ImportedRun imported = import_kineto_trace(write(dir / "layered.json", layered_trace()), db, options);
  EXPECT_TRUE(imported.memory_categories);
  ts::store::Reader r(db);
  std::map<std::string, int64_t> peak;
  int64_t total = 0, t_ns = -1;
  for (const auto& p : r.memory_peak(imported.run_id)) {
    peak[p.category] = p.bytes;
    total += p.bytes;
    t_ns = p.t_ns;
  }
  EXPECT_EQ(total, 177) << "PyTorch's own total at its peak";
  EXPECT_EQ(t_ns, 10'000);
  EXPECT_EQ(peak["weights"], 100);     // PARAMETER
  EXPECT_EQ(peak["inputs"], 8);        // INPUT
  EXPECT_EQ(peak["workspace"], 16);    // TEMPORARY
  EXPECT_EQ(peak["activations"], 50);  // ACTIVATION
  EXPECT_EQ(peak["other"], 3);         // PyTorch could not tell
  EXPECT_EQ(peak["optimizer_state"], 0);
  EXPECT_EQ(r.memory_timeline(imported.run_id).size(), 3u * 8u);
  std::string absent, mapping;
  for (const auto& e : r.environment(imported.run_id)) {
    if (e.key == "absent") absent = e.value;
    if (e.key == "memory_categories") mapping = e.value;
  }
  EXPECT_EQ(absent.find("memory categories"), std::string::npos) << absent;
  EXPECT_NE(mapping.find("AUTOGRAD_DETAIL -> activation_grads"), std::string::npos) << mapping;

  // Fewer points kept than the file has: the largest of each stretch, so the peak stays.
  const auto two = read_memory_timeline(dir / "memory.json", 0, 2);
  ASSERT_EQ(two.points.size(), 2u * 8u);
  EXPECT_EQ(two.points.front().t_ns, 10'000);
  EXPECT_EQ(two.points.back().t_ns, 20'000);
  EXPECT_EQ(two.peak_bytes, 177);

  // A file that is no timeline: an error, and nothing written.
  const fs::path other = dir / "other.db";
  options.memory_timeline = write(dir / "bad.json", "[[0, 10], [[0, 1]]]");
  EXPECT_THROW(import_kineto_trace(dir / "layered.json", other, options), TraceError);
  EXPECT_FALSE(fs::exists(other));
}
