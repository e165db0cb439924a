// `trainscope run W --framework pytorch` (issue 42): the PyTorch reference under the profiler,
// imported as a run; `compare` and the report set it beside trainscope's own run of the same
// configuration. Without PyTorch (a Python that cannot import it) the command says how to install
// it and writes nothing; options the references lack are refused. The runs themselves need the
// machine's PyTorch (an outside dependency: skipped, saying so, where it is not installed).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "nlohmann/json.hpp"
#include "store/reader.h"
#include "tests/cli/cli_test_util.h"

namespace {

using ts::testing::run_command;
using ts::testing::run_trainscope;
using ts::testing::TempDir;

TEST(FrameworkPytorch, WithoutPyTorchTheCommandSaysHowToInstallItAndWritesNothing) {
  TempDir dir;
  const auto fake = dir / "python-without-torch", db = dir / "t.db";
  std::ofstream(fake) << "#!/bin/sh\nexit 1\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const auto res =
      run_command("TS_PYTHON=" + fake.string() + " " + TRAINSCOPE_BIN +
                  " run resnet50 --framework pytorch --preset tiny --iters 2 --db " + db.string() + " 2>&1");
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_NE(res.out.find("cannot import torch"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("pip install torch"), std::string::npos) << res.out;
  EXPECT_FALSE(std::filesystem::exists(db)) << "nothing written";
}

TEST(FrameworkPytorch, OptionsTheReferencesLackAreRefused) {
  TempDir dir;
  const auto db = dir / "t.db";
  for (const std::string extra : {"--nproc 2", "--data fashion-mnist", "--no-trace", "--eval-every 2"}) {
    const auto res = run_trainscope("run resnet50 --framework pytorch --preset tiny --iters 2 " + extra + " --db " +
                                    db.string() + " 2>&1");
    EXPECT_EQ(res.exit_code, 2) << extra << ": " << res.out;
  }
  const auto nproc =
      run_trainscope("run resnet50 --framework pytorch --preset tiny --nproc 2 --db " + db.string() + " 2>&1");
  EXPECT_NE(nproc.out.find("--framework pytorch runs the PyTorch reference in one process"), std::string::npos)
      << nproc.out;
  EXPECT_EQ(run_trainscope("run resnet50 --framework tensorflow --db " + db.string() + " 2>&1").exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(db)) << "nothing written";
}

// The same configuration in both frameworks: the PyTorch run holds its steps (warm-up apart),
// phases, layers named as trainscope names them, ops and a sustained rate in the workload's unit;
// compare pairs the two (framework first, layers both name) and the report sets them side by side.
TEST(FrameworkPytorch, AReferenceRunComparesWithTrainscopesOwn) {
  if (run_command("python3 -c 'import torch' 2>&1").exit_code != 0)
    GTEST_SKIP() << "PyTorch is not installed (pip install torch): --framework pytorch cannot run here";
  TempDir dir;
  const auto db = dir / "t.db";
  const std::string common = " --preset tiny --iters 4 --warmup 1 --threads 1 --db " + db.string();
  ASSERT_EQ(run_trainscope("run resnet50 --eval-batches 0" + common + " > /dev/null 2>&1").exit_code, 0);
  const auto pt = run_trainscope("run resnet50 --framework pytorch" + common + " 2>&1");
  ASSERT_EQ(pt.exit_code, 0) << pt.out;
  EXPECT_NE(pt.out.find("profiled iteration 5/5"), std::string::npos) << "the script's progress: " << pt.out;
  EXPECT_NE(pt.out.find("images/s sustained over 4 timed iterations"), std::string::npos) << pt.out;
  EXPECT_NE(pt.out.find("the iterations without the profiler first"), std::string::npos) << pt.out;
  EXPECT_NE(pt.out.find("images/s sustained: the same iterations without PyTorch's profiler"), std::string::npos)
      << pt.out;

  ts::store::Reader r(db);
  const auto run = r.run(2);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->framework, "pytorch");
  EXPECT_EQ(run->workload, "resnet50");
  EXPECT_EQ(run->batch_size, r.run(1)->batch_size) << "the same configuration: compare pairs them";
  EXPECT_EQ(run->warmup, 1);
  const auto iterations = r.iterations(2);
  ASSERT_EQ(iterations.size(), 5u);
  EXPECT_TRUE(iterations[0].warmup);
  EXPECT_GT(iterations[4].loss, 0) << "the script's losses";
  std::set<std::string> phases;
  for (const auto& p : r.phases(2)) phases.insert(p.phase);
  EXPECT_EQ(phases, (std::set<std::string>{"forward", "backward", "optimizer"}));
  bool conv1 = false;
  for (const auto& l : r.layers(2)) {
    if (l.layer != "layer1.0.conv1") continue;
    conv1 = true;
    EXPECT_GT(l.forward_ns, 0);
    EXPECT_GT(l.backward_ns, 0) << "its backward node found by sequence number";
  }
  EXPECT_TRUE(conv1) << "layers carry trainscope's names";
  EXPECT_FALSE(r.op_summary(2).empty());
  // PyTorch's memory categories, by the mapping the run states: weights and their gradients at least.
  std::map<std::string, int64_t> peak;
  int64_t stored_total = 0;
  for (const auto& p : r.memory_peak(2)) peak[p.category] = p.bytes, stored_total += p.bytes;
  EXPECT_GT(peak["weights"], 0);
  EXPECT_GT(peak["weight_grads"], 0);
  // ... whose total at the peak is PyTorch's own: the largest sum of its timeline's sizes.
  int64_t pytorch_peak = -1;
  for (const auto& f : std::filesystem::directory_iterator(db.string() + ".traces")) {
    if (!f.path().string().ends_with(".memory.json")) continue;
    const auto timeline = nlohmann::json::parse(std::ifstream(f.path()));
    for (const auto& sizes : timeline[1]) {
      int64_t sum = 0;
      for (const auto& v : sizes) sum += v.get<int64_t>();
      pytorch_peak = std::max(pytorch_peak, sum);
    }
  }
  EXPECT_EQ(stored_total, pytorch_peak);
  std::string torch;
  for (const auto& e : r.environment(2))
    if (e.key == "pytorch.torch_version") torch = e.value;
  EXPECT_FALSE(torch.empty());
  // The run's start is the trace's wall clock (baseTimeNanoseconds + the first event), today.
  EXPECT_EQ(run->started_at.substr(0, 4), r.run(1)->started_at.substr(0, 4));

  const auto cmp = run_trainscope("compare 1 2 --db " + db.string() + " 2>&1");
  ASSERT_EQ(cmp.exit_code, 0) << cmp.out;
  EXPECT_NE(cmp.out.find("| framework | trainscope | pytorch |"), std::string::npos) << cmp.out;
  EXPECT_NE(cmp.out.find("process RSS growth"), std::string::npos) << cmp.out;
  EXPECT_NE(cmp.out.find("| weights |"), std::string::npos) << "both kept tensors by category: " << cmp.out;
  EXPECT_NE(cmp.out.find("| layer | "), std::string::npos) << "the layers both name: " << cmp.out;
  EXPECT_EQ(cmp.out.find("| op |"), std::string::npos) << "each framework's ops are its own: " << cmp.out;

  const auto md = dir / "r.md";
  ASSERT_EQ(run_trainscope("report " + db.string() + " --md " + md.string() + " 2>&1").exit_code, 0);
  std::ifstream in(md);
  const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("Frameworks side by side"), std::string::npos) << report;
  EXPECT_NE(report.find("resnet50/tiny cpu batch " + std::to_string(run->batch_size) + " (pytorch)"), std::string::npos)
      << "its own configuration, never pooled with trainscope's: " << report;
}

}  // namespace

namespace {

// Six steps of 10 ms of a CPU-only PyTorch profile whose layer names are trainscope's (conv1 and fc
// run in every step), as a user's own trace brings them.
std::string six_step_trace() {
  std::string events;
  for (int k = 0; k < 6; ++k) {
    const int b = 10'000 * k;
    for (const auto& [cat, name, ts, dur] : std::vector<std::tuple<std::string, std::string, int, int>>{
             {"user_annotation", "ProfilerStep#" + std::to_string(k), b, 10'000},
             {"user_annotation", "forward", b, 4'000},
             {"user_annotation", "layer: conv1", b + 10, 2'000},
             {"cpu_op", "aten::conv2d", b + 20, 1'900},
             {"user_annotation", "layer: fc", b + 2'100, 1'000},
             {"cpu_op", "aten::linear", b + 2'110, 900}}) {
      events += (events.empty() ? "" : ",\n") + std::string(R"({"ph":"X","cat":")") + cat + R"(","name":")" + name +
                R"(","pid":1,"tid":1,"ts":)" + std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) + "}";
    }
  }
  return "[" + events + "]";
}

}  // namespace

// Without PyTorch too: an imported PyTorch run and trainscope's own of the same configuration
// pair in `compare` (framework first, layers both name, no op of either as new) and in the report.
TEST(FrameworkPytorch, CompareAndTheReportPairAnImportedRunWithTrainscopesOwn) {
  TempDir dir;
  const auto db = dir / "t.db", trace = dir / "resnet.json";
  ASSERT_EQ(run_trainscope("run resnet50 --preset tiny --iters 6 --warmup 1 --threads 1 --eval-batches 0 --db " +
                           db.string() + " > /dev/null 2>&1")
                .exit_code,
            0);
  std::ofstream(trace) << six_step_trace();
  const auto imported = run_trainscope("import-trace " + trace.string() + " --db " + db.string() +
                                       " --workload resnet50 --preset tiny --batch " +
                                       std::to_string(ts::store::Reader(db).run(1)->batch_size) + " 2>&1");
  ASSERT_EQ(imported.exit_code, 0) << imported.out;
  const auto cmp = run_trainscope("compare 1 2 --db " + db.string() + " 2>&1");
  ASSERT_EQ(cmp.exit_code, 0) << cmp.out;
  EXPECT_NE(cmp.out.find("| framework | trainscope | pytorch |"), std::string::npos) << cmp.out;
  EXPECT_NE(cmp.out.find("| layer | conv1 |"), std::string::npos) << "a layer both name: " << cmp.out;
  EXPECT_EQ(cmp.out.find("| op |"), std::string::npos) << "each framework's ops are its own: " << cmp.out;
  EXPECT_NE(cmp.out.find("| layer | fc |"), std::string::npos) << cmp.out;
  const auto md = dir / "r.md";
  ASSERT_EQ(run_trainscope("report " + db.string() + " --md " + md.string() + " 2>&1").exit_code, 0);
  std::ifstream in(md);
  const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("Frameworks side by side"), std::string::npos) << report;
}
