// importers/kineto_import.h: a PyTorch profiler trace read into the store as a run. A hand-made
// trace of two steps whose every figure is worked out below; a trace cut short leaves nothing.
#include "importers/kineto_import.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

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
