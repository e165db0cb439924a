// importers/nsys_import.h: an Nsight Systems SQLite export read into the store as a run. The
// checked-in fixture (fixtures/nsys_small.sql, rows out of time order) built into a file, every
// figure the import stores worked out below; variants without tables; files that are no export.
#include "importers/nsys_import.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "importers/trace_records.h"
#include "store/reader.h"
#include "tests/importers/nsys_fixture.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::importers;
using ts::testing::build_nsys_export;

namespace {

std::string env_value(const fs::path& db, int64_t run, const std::string& key) {
  for (const auto& e : ts::store::Reader(db).environment(run))
    if (e.key == key) return e.value;
  return "";
}

}  // namespace

// The fixture's session times in ns; stored times are from its first stored record, step 0's
// start at 1,000,000 (the NVTX domain at 1,001,000 and the OS call at 1,002,000 are left out).
// - NVTX ranges: step 0 [1,000,000, 1,100,000] and step 1 [1,100,000, 1,200,000] on thread
//   4242 (iterations 0 and 1: [0, 100,000], [100,000, 200,000]); `forward` (a registered
//   string, textId) [1,005,000, ...] in step 0; `data loading` (a start/end range) on thread 4243
//   in step 1. Left out: a mark, an unclosed range, a domain (NVTX) and one OS runtime call: 4.
// - 7 runtime calls (api) and 7 device activities on device 0: 14 GPU activities.
// - Step 0 launched: a gemm [20,000, 50,000] (corr 1), a copy HtoD of 4096 bytes [55,000,
//   60,000] (corr 4) and relu [105,000, 115,000] (corr 5, launched at 90,000: step 0, though it
//   runs in step 1's CPU range). Span [20,000, 115,000] = 95,000; compute 30,000 + 10,000 =
//   40,000; memcpy 5,000; busy 45,000; idle 50,000.
// - Step 1: a set of 1024 bytes [140,000, 142,000] (corr 6), fused_adam [150,000, 160,000]
//   (corr 99: no runtime call launched it, so its own start's step), NCCL's all-reduce [200,000,
//   240,000] (corr 3, launched at 190,000) and a gemm [210,000, 230,000] (corr 2, launched at
//   115,000; process 5000's own corr 2 at 10,000 is not its launch). Span [140,000, 240,000] =
//   100,000; compute 10,000 + 20,000 = 30,000; comm 40,000; memset 2,000; overlap (the gemm
//   under the all-reduce) 20,000; exposed comm 20,000; busy 2,000 + 10,000 + 40,000 = 52,000;
//   idle 48,000.
TEST(NsysImport, TheFixtureBecomesARunWithItsIterationsRangesGpuActivitiesAndBreakdown) {
  ts::testing::ScratchDir dir("ts_nsys_import");
  const fs::path db = dir / "i.db";
  ImportOptions options;
  options.batch_size = 32;
  options.batch = 3;  // progress and writes in several batches, as a large file gives
  int64_t surveyed = 0, imported_records = 0;
  options.progress = [&](int pass, int64_t records) { (pass == 1 ? surveyed : imported_records) = records; };
  const ImportedRun imported = import_nsys_export(build_nsys_export(dir / "train_step.sqlite"), db, options);
  EXPECT_EQ(imported.device, "cuda");
  EXPECT_EQ(imported.iterations, 2);
  EXPECT_EQ(imported.cpu_events, 4);  // 2 steps, 2 phases
  EXPECT_EQ(imported.gpu_activities, 14);
  EXPECT_EQ(imported.memory_samples, 0);
  EXPECT_EQ(imported.left_out, 4);
  EXPECT_EQ(surveyed, 18) << "the rows the second pass reads";
  EXPECT_EQ(imported_records, 18);

  ts::store::Reader r(db);
  const auto run = r.run(imported.run_id);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->framework, "nsys");
  EXPECT_EQ(run->workload, "train_step");
  EXPECT_EQ(run->device, "cuda");
  EXPECT_EQ(run->status, ts::store::RunStatus::completed);
  EXPECT_EQ(run->started_at, "2023-11-14T22:13:20Z");  // TARGET_INFO_SESSION_START_TIME

  const auto iterations = r.iterations(imported.run_id);
  ASSERT_EQ(iterations.size(), 2u);
  EXPECT_EQ(iterations[0].index, 0);
  EXPECT_EQ(iterations[0].start_ns, 0);
  EXPECT_EQ(iterations[0].end_ns, 100'000);
  EXPECT_EQ(iterations[1].index, 1);
  EXPECT_EQ(iterations[1].start_ns, 100'000);
  EXPECT_EQ(iterations[1].end_ns, 200'000);
  EXPECT_EQ(iterations[1].samples, 32);

  std::map<std::string, ts::store::EventRow> events;
  for (const auto& e : r.events(imported.run_id)) events[e.name] = e;
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events["step 0"].kind, "iteration");
  EXPECT_EQ(events["step 1"].kind, "iteration");
  EXPECT_EQ(events["forward"].kind, "phase") << "its text from StringIds";
  EXPECT_EQ(events["forward"].start_ns, 5'000);
  EXPECT_EQ(events["forward"].end_ns, 55'000);
  EXPECT_EQ(events["forward"].iteration, 0);
  EXPECT_EQ(events["forward"].thread, 0);
  EXPECT_EQ(events["data loading"].kind, "phase");
  EXPECT_EQ(events["data loading"].iteration, 1);
  EXPECT_EQ(events["data loading"].thread, 1);

  std::map<std::string, int> kinds;
  for (const auto& a : r.gpu_activities(imported.run_id)) {
    ++kinds[a.kind];
    if (a.kind == "api") {
      EXPECT_EQ(a.device, -1);
      EXPECT_EQ(a.iteration, a.start_ns < 100'000 ? 0 : 1) << a.name << " at " << a.start_ns;
    } else {
      EXPECT_EQ(a.device, 0);
    }
    if (a.name == "relu_kernel") {
      EXPECT_EQ(a.iteration, 0) << "by its launch, not by when it ran";
      EXPECT_EQ(a.start_ns, 105'000);
    }
    if (a.name == "fused_adam_kernel") {
      EXPECT_EQ(a.iteration, 1) << "no launch: its own start's";
    }
    if (a.name.starts_with("void at::native::sgemm")) {
      EXPECT_EQ(a.iteration, a.correlation == 1 ? 0 : 1) << "corr " << a.correlation << ": its own process's launch";
      EXPECT_EQ(a.stream, 7);
    }
    if (a.name.starts_with("nccl")) {
      EXPECT_EQ(a.kind, "comm");
      EXPECT_EQ(a.stream, 9);
      EXPECT_EQ(a.correlation, 3);
    }
    if (a.kind == "memcpy") {
      EXPECT_EQ(a.name, "Memcpy HtoD");
      EXPECT_EQ(a.bytes, 4096);
      EXPECT_EQ(a.iteration, 0);
    }
    if (a.kind == "memset") {
      EXPECT_EQ(a.bytes, 1024);
      EXPECT_EQ(a.iteration, 1);
    }
  }
  EXPECT_EQ(kinds["api"], 7);
  EXPECT_EQ(kinds["kernel"], 4);
  EXPECT_EQ(kinds["comm"], 1);
  EXPECT_EQ(kinds["memcpy"], 1);
  EXPECT_EQ(kinds["memset"], 1);

  const auto breakdown = r.gpu_breakdown(imported.run_id);
  ASSERT_EQ(breakdown.size(), 2u);
  const auto& zero = breakdown[0];
  EXPECT_EQ(zero.device, 0);
  EXPECT_EQ(zero.iteration, 0);
  EXPECT_EQ(zero.start_ns, 20'000);
  EXPECT_EQ(zero.end_ns, 115'000);
  EXPECT_EQ(zero.compute_ns, 40'000);
  EXPECT_EQ(zero.memcpy_ns, 5'000);
  EXPECT_EQ(zero.memset_ns, 0);
  EXPECT_EQ(zero.comm_ns, 0);
  EXPECT_EQ(zero.overlap_ns, 0);
  EXPECT_EQ(zero.busy_ns, 45'000);
  EXPECT_EQ(zero.idle_ns, 50'000);
  const auto& one = breakdown[1];
  EXPECT_EQ(one.iteration, 1);
  EXPECT_EQ(one.start_ns, 140'000);
  EXPECT_EQ(one.end_ns, 240'000);
  EXPECT_EQ(one.compute_ns, 30'000);
  EXPECT_EQ(one.comm_ns, 40'000);
  EXPECT_EQ(one.memset_ns, 2'000);
  EXPECT_EQ(one.overlap_ns, 20'000);
  EXPECT_EQ(one.exposed_comm_ns, 20'000);
  EXPECT_EQ(one.busy_ns, 52'000);
  EXPECT_EQ(one.idle_ns, 48'000);

  EXPECT_EQ(env_value(db, imported.run_id, "framework"), "nsys");
  EXPECT_EQ(env_value(db, imported.run_id, "trace_format"), "nsys sqlite export, schema 3.11.1");
  EXPECT_EQ(env_value(db, imported.run_id, "left_out_records"), "4");
  EXPECT_EQ(env_value(db, imported.run_id, "trace_origin_ns"), "1000000");
  EXPECT_EQ(env_value(db, imported.run_id, "thread_0"), "4242/4242 python3");
  EXPECT_EQ(env_value(db, imported.run_id, "thread_1"), "4242/4243 loader");
  EXPECT_EQ(env_value(db, imported.run_id, "gpu_0"), "NVIDIA H100 80GB HBM3");
  const std::string absent = env_value(db, imported.run_id, "absent");
  EXPECT_NE(absent.find("loss"), std::string::npos) << absent;
  EXPECT_NE(absent.find("CPU ops"), std::string::npos) << absent;
  EXPECT_EQ(absent.find("GPU activities"), std::string::npos) << "the export has them: " << absent;
  EXPECT_EQ(absent.find("iterations"), std::string::npos) << absent;
}

// A report without CUDA's kernels, copies and sets (CPU-only): GPU activities absent, said, and
// no breakdown; the runtime calls and the steps stay. With NVTX alone, no API calls either.
TEST(NsysImport, AnExportWithoutSomeTablesSaysWhatItLacks) {
  ts::testing::ScratchDir dir("ts_nsys_import");
  const fs::path db = dir / "i.db";
  const auto cpu = import_nsys_export(
      build_nsys_export(dir / "cpu.sqlite",
                        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY; "
                        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET;"),
      db, {});
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.iterations, 2);
  EXPECT_EQ(cpu.gpu_activities, 7);  // the runtime calls
  ts::store::Reader r(db);
  EXPECT_EQ(r.run(cpu.run_id)->device, "cpu");
  EXPECT_TRUE(r.gpu_breakdown(cpu.run_id).empty());
  const std::string absent = env_value(db, cpu.run_id, "absent");
  EXPECT_NE(absent.find("GPU activities (no CUDA kernels"), std::string::npos) << absent;

  const auto nvtx = import_nsys_export(
      build_nsys_export(dir / "nvtx.sqlite",
                        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY; "
                        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET; DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME; "
                        "DROP TABLE META_DATA_EXPORT;"),
      db, {});
  EXPECT_EQ(nvtx.iterations, 2);
  EXPECT_EQ(nvtx.cpu_events, 4);
  EXPECT_EQ(nvtx.gpu_activities, 0);
  EXPECT_NE(env_value(db, nvtx.run_id, "absent").find("CUDA API calls"), std::string::npos);
  EXPECT_EQ(env_value(db, nvtx.run_id, "trace_format"), "nsys sqlite export") << "no version: none said";

  // No range named like a step: no iterations, said.
  const auto steps = import_nsys_export(
      build_nsys_export(dir / "nosteps.sqlite", "UPDATE NVTX_EVENTS SET text = 'warmup' WHERE text LIKE 'step %';"), db,
      {});
  EXPECT_EQ(steps.iterations, 0);
  EXPECT_NE(env_value(db, steps.run_id, "absent").find("iterations (no NVTX range named like a step"),
            std::string::npos);
}

// What is no export, or one cut short, is a TraceError and nothing is written: the db is not
// even made.
TEST(NsysImport, AFileThatIsNoReadableExportLeavesNothing) {
  ts::testing::ScratchDir dir("ts_nsys_import");
  const fs::path db = dir / "i.db";
  std::ofstream(dir / "notes.sqlite") << "SQLite? no, some text that is long enough to be read as a header at all";
  try {
    import_nsys_export(dir / "notes.sqlite", db, {});
    ADD_FAILURE() << "text read as an export";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.kind(), TraceError::Kind::foreign);
    EXPECT_NE(std::string(e.what()).find("notes.sqlite' is not an SQLite file"), std::string::npos) << e.what();
  }

  const fs::path other = dir / "other.sqlite";
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(other.c_str(), &raw), SQLITE_OK);
    sqlite3_exec(raw, "CREATE TABLE results (x INTEGER); INSERT INTO results VALUES (1);", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
  }
  try {
    import_nsys_export(other, db, {});
    ADD_FAILURE() << "an SQLite file without nsys's tables read as an export";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.kind(), TraceError::Kind::foreign);
    EXPECT_NE(std::string(e.what()).find("no Nsight Systems export"), std::string::npos) << e.what();
  }

  const fs::path cut = build_nsys_export(dir / "cut.sqlite");
  fs::resize_file(cut, fs::file_size(cut) / 2);
  try {
    import_nsys_export(cut, db, {});
    ADD_FAILURE() << "half a file read as an export";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.kind(), TraceError::Kind::truncated);
    EXPECT_NE(std::string(e.what()).find("cut.sqlite' is cut short"), std::string::npos) << e.what();
  }
  EXPECT_THROW(import_nsys_export(dir / "missing.sqlite", db, {}), TraceError);
  EXPECT_FALSE(fs::exists(db)) << "nothing was begun";
}
