// `trainscope import-trace` (issue 42): a PyTorch profiler trace read into a db as a run that
// `show` and `runs` print, saying where it came from and what it does not hold; a file that is
// no trace is refused with exit 2 and nothing written; an Nsight Systems export, told by its
// first bytes, likewise. With the machine's PyTorch (skipped where there is none): a trace its
// profiler writes at test time, steps and ops read back.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "store/reader.h"
#include "tests/cli/cli_test_util.h"
#include "tests/importers/nsys_fixture.h"

namespace {

using ts::testing::run_command;
using ts::testing::run_trainscope;
using ts::testing::TempDir;

// Two steps, a CPU op in each, a kernel launched in the first.
const std::string kTrace = R"json({"traceEvents": [
 {"ph":"X","cat":"user_annotation","name":"ProfilerStep#0","pid":1,"tid":1,"ts":100,"dur":50},
 {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":150,"dur":50},
 {"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":110,"dur":10},
 {"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":160,"dur":10},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":112,"dur":2,"args":{"correlation":1}},
 {"ph":"X","cat":"kernel","name":"gemv","pid":0,"tid":7,"ts":115,"dur":20,"args":{"device":0,"stream":7,"correlation":1}}
]})json";

TEST(ImportTrace, APyTorchTraceBecomesARunThatShowAndRunsPrint) {
  TempDir dir;
  const auto trace = dir / "step.json", db = dir / "t.db";
  std::ofstream(trace) << kTrace;
  const auto res = run_trainscope("import-trace " + trace.string() + " --db " + db.string() +
                                  " --workload mlp --preset small --batch 8 2>&1");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("run 1 of"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("2 iterations, 4 CPU events, 2 GPU activities"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("absent in the trace: memory"), std::string::npos) << res.out;

  const auto show = run_trainscope("show 1 --db " + db.string());
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("run 1  mlp/small on cuda  batch 8"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("imported       pytorch (kineto chrome trace) from " + trace.string()), std::string::npos)
      << show.out;
  // --batch 8 over two steps of 50 us: 16 samples in 100 us.
  EXPECT_NE(show.out.find("throughput     160000.00 samples/s sustained over 2 timed iterations"), std::string::npos)
      << show.out;
  EXPECT_EQ(ts::store::Reader(db).run(1)->framework, "pytorch");

  // Without --batch the work is unknown: no rate, '-' where one is listed, never 0.
  ASSERT_EQ(
      run_trainscope("import-trace " + trace.string() + " --db " + db.string() + " --workload unsized 2>&1").exit_code,
      0);
  const auto runs = run_trainscope("runs --db " + db.string());
  EXPECT_NE(runs.out.find("unsized"), std::string::npos) << runs.out;
  const auto line_start = runs.out.find("unsized");
  const std::string line = runs.out.substr(line_start, runs.out.find('\n', line_start) - line_start);
  EXPECT_EQ(line.find("samples/s"), std::string::npos) << "no rate stored: '-', never 0: " << runs.out;
  const auto unsized = run_trainscope("show 2 --db " + db.string());
  EXPECT_EQ(unsized.out.find("  throughput     "), std::string::npos) << unsized.out;
  EXPECT_NE(unsized.out.find("throughput (the samples per step were not given: --batch)"), std::string::npos)
      << unsized.out;
}

TEST(ImportTrace, WhatIsNoTraceIsRefusedAndNothingIsWritten) {
  TempDir dir;
  const auto db = dir / "t.db";
  std::ofstream(dir / "other.json") << R"({"results": [1, 2]})";
  std::ofstream(dir / "cut.json") << kTrace.substr(0, kTrace.size() / 2);
  for (const std::string file : {"other.json", "cut.json", "missing.json"}) {
    const auto res = run_trainscope("import-trace " + (dir / file).string() + " --db " + db.string() + " 2>&1");
    EXPECT_EQ(res.exit_code, 2) << file << ": " << res.out;
    EXPECT_NE(res.out.find(file), std::string::npos) << "the message names the file: " << res.out;
  }
  EXPECT_FALSE(std::filesystem::exists(db)) << "nothing written";
  EXPECT_EQ(run_trainscope("import-trace " + (dir / "x.json").string() + " --batch -1 2>&1").exit_code, 2);
}

// An Nsight Systems SQLite export (the fixture, tests/importers/nsys_import_test.cpp works out its
// figures), told from a Chrome trace by its first bytes, whatever its name.
TEST(ImportTrace, AnNsysExportBecomesARunThatShowNames) {
  TempDir dir;
  const auto sqlite = ts::testing::build_nsys_export(dir / "report1.sqlite"), db = dir / "t.db";
  const auto res = run_trainscope("import-trace " + sqlite.string() + " --db " + db.string() + " --batch 8 2>&1");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("run 1 of '" + db.string() + "' (nsys, cuda): 2 iterations, 4 CPU events, 14 GPU activities"),
            std::string::npos)
      << res.out;
  EXPECT_NE(res.out.find("absent in the trace: CPU ops"), std::string::npos) << res.out;

  const auto show = run_trainscope("show 1 --db " + db.string());
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("run 1  report1/- on cuda  batch 8"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("imported       nsys (nsys sqlite export, schema 3.11.1) from " + sqlite.string()),
            std::string::npos)
      << show.out;
  EXPECT_EQ(ts::store::Reader(db).run(1)->framework, "nsys");

  std::ofstream(dir / "plain.sqlite") << "not SQLite";  // an .sqlite name that is no SQLite: read as a trace
  const auto plain =
      run_trainscope("import-trace " + (dir / "plain.sqlite").string() + " --db " + (dir / "u.db").string() + " 2>&1");
  EXPECT_EQ(plain.exit_code, 2) << plain.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "u.db")) << "nothing written";
}

// The machine's PyTorch (an outside dependency, PyPI): a tiny model trained 3 profiled steps on
// the CPU, its trace exported as PyTorch writes it, imported: the 3 steps and their ops.
TEST(ImportTrace, ATraceThatThisMachinesPyTorchWroteImports) {
  if (run_command("python3 -c 'import torch' 2>&1").exit_code != 0)
    GTEST_SKIP() << "PyTorch is not installed (pip install torch): the trace it writes cannot be made here";
  TempDir dir;
  const auto trace = dir / "torch_trace.json", db = dir / "t.db";
  const std::string script =
      "import torch\n"
      "from torch.profiler import profile, schedule, ProfilerActivity\n"
      "m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))\n"
      "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
      "x, y = torch.randn(16, 64), torch.randint(0, 10, (16,))\n"
      "with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3, repeat=1), "
      "profile_memory=True) as p:\n"
      "    for _ in range(4):\n"
      "        opt.zero_grad(); torch.nn.functional.cross_entropy(m(x), y).backward(); opt.step(); p.step()\n"
      "p.export_chrome_trace('" +
      trace.string() + "')\n";
  std::ofstream(dir / "make_trace.py") << script;
  const auto made = run_command("python3 " + (dir / "make_trace.py").string() + " 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.out;
  const auto res = run_trainscope("import-trace " + trace.string() + " --db " + db.string() + " --batch 16 2>&1");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  ts::store::Reader r(db);
  EXPECT_EQ(r.iterations(1).size(), 3u) << res.out;  // the active steps
  int ops = 0;
  for (const auto& e : r.events(1)) ops += e.kind == "op" && e.name.starts_with("aten::") ? 1 : 0;
  EXPECT_GT(ops, 10) << res.out;
  EXPECT_EQ(r.run(1)->device, "cpu");
  EXPECT_GT(r.samples(1).size(), 0u) << "profile_memory's [memory] events: " << res.out;
}

}  // namespace
