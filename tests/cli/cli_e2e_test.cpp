// End-to-end tests of the trainscope command: the real binary, a real db, read back.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "cli/openmp_waiting.h"
#include "cli_test_util.h"
#include "nlohmann/json.hpp"
#include "store/reader.h"

using namespace ts;
using namespace ts::testing;

namespace {

std::string tiny_run(const std::filesystem::path& db, const std::string& extra = "") {
  return "run resnet50 --preset tiny --iters 3 --warmup 1 --threads 1 --eval-batches 1 --db " + db.string() + " " +
         extra;
}

std::map<std::string, double> metrics_of(store::Reader& r, int64_t run) {
  std::map<std::string, double> m;
  for (const auto& row : r.metrics(run)) {
    if (row.iteration < 0) m[row.name] = row.value;
  }
  return m;
}

}  // namespace

TEST(Cli, RunStoresACompleteRun) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto res = run_trainscope(tiny_run(db));
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("images/s sustained"), std::string::npos) << res.out;  // the headline, in the workload's unit
  EXPECT_NE(res.out.find("stored in"), std::string::npos) << res.out;

  store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 1u);
  const auto& run = runs[0];
  EXPECT_EQ(run.status, store::RunStatus::completed);
  EXPECT_EQ(run.workload, "resnet50");
  EXPECT_EQ(run.batch_size, 4);
  EXPECT_NE(run.config_json.find("\"image_size\":\"32\""), std::string::npos) << run.config_json;

  // Environment, iterations (warm-up marked), phases of every iteration.
  std::map<std::string, std::string> env;
  for (const auto& e : r.environment(run.id)) env[e.key] = e.value;
  EXPECT_TRUE(env.contains("cpu.model"));
  EXPECT_TRUE(env.contains("lib.onednn"));
  EXPECT_TRUE(env.contains("git.revision"));
  const auto its = r.iterations(run.id);
  ASSERT_EQ(its.size(), 4u);
  EXPECT_TRUE(its[0].warmup);
  EXPECT_FALSE(its[1].warmup);
  std::map<int64_t, std::set<std::string>> phases;
  for (const auto& p : r.phases(run.id)) phases[p.iteration].insert(p.phase);
  ASSERT_EQ(phases.size(), 4u);
  for (const auto& [i, names] : phases)
    EXPECT_EQ(names, (std::set<std::string>{"data", "forward", "backward", "optimizer"})) << i;

  // Events with interned names and layers; op summary; layers with their parameters.
  EXPECT_GT(r.event_count(run.id), 500);
  bool conv_event = false;
  for (const auto& e : r.events(run.id, INT64_MIN, INT64_MAX, 5000))
    conv_event |= e.name == "conv2d" && e.layer == "layer3.2.conv2";
  EXPECT_TRUE(conv_event);
  std::set<std::string> ops;
  for (const auto& o : r.op_summary(run.id)) ops.insert(o.name);
  for (const char* op : {"conv2d", "batch_norm", "relu", "max_pool2d", "linear", "softmax_cross_entropy"})
    EXPECT_TRUE(ops.contains(op)) << op;
  const auto m = metrics_of(r, run.id);
  int64_t layer_params = 0;
  bool conv_layer = false;
  for (const auto& l : r.layers(run.id)) {
    layer_params += l.parameter_count;
    if (l.layer == "layer1.0.conv1") {
      conv_layer = true;
      EXPECT_GT(l.forward_ns, 0);
      EXPECT_GT(l.backward_ns, 0);
      EXPECT_GT(l.activation_bytes, 0);
    }
  }
  EXPECT_TRUE(conv_layer);
  EXPECT_EQ(layer_params, static_cast<int64_t>(m.at("parameter_count")));

  // Memory: weights are exactly 4 bytes per parameter; the peak has activations; a timeline.
  std::map<std::string, int64_t> peak;
  for (const auto& p : r.memory_peak(run.id)) peak[p.category] = p.bytes;
  EXPECT_EQ(peak.at("weights"), 4 * static_cast<int64_t>(m.at("parameter_count")));
  EXPECT_GT(peak.at("activations"), 0);
  EXPECT_GT(peak.at("weight_grads"), 0);
  EXPECT_GT(peak.at("optimizer_state"), 0);
  EXPECT_GT(r.memory_timeline(run.id).size(), 9u);

  EXPECT_GT(m.at("throughput_median"), 0);
  EXPECT_EQ(m.at("timed_iterations"), 3);
  EXPECT_TRUE(m.contains("accuracy"));
  EXPECT_TRUE(m.contains("host_cache_hits"));  // their values: RunStoresHowTheHostCacheFared
  EXPECT_TRUE(m.contains("host_cache_misses"));
  EXPECT_TRUE(m.contains("host_cache_evicted_bytes"));
  EXPECT_FALSE(r.samples(run.id).empty());

  // `show` prints the same summary from the db; `runs` lists it.
  const auto show = run_trainscope("show 1 --db " + db.string());
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("memory at peak"), std::string::npos) << show.out;
  const auto list = run_trainscope("runs --db " + db.string());
  EXPECT_NE(list.out.find("resnet50"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("completed"), std::string::npos) << list.out;
}

// The host allocator caches blocks of 64 KiB and more. At batch 64, resnet50 tiny's stem output
// [64, 16, 16, 16] is 1 MiB in any layout (16 channels fill blocks of 8 and of 16 alike), so
// every ISA makes such blocks: the first come fresh from the system (misses), and the next
// iterations' are served from the cache (hits).
TEST(Cli, RunStoresHowTheHostCacheFared) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto res = run_trainscope(tiny_run(db, "--batch 64"));
  ASSERT_EQ(res.exit_code, 0) << res.out;
  store::Reader r(db);
  const auto m = metrics_of(r, 1);
  EXPECT_GT(m.at("host_cache_misses"), 0);
  EXPECT_GT(m.at("host_cache_hits"), 0);
  EXPECT_GE(m.at("host_cache_evicted_bytes"), 0);
}

TEST(Cli, NoTraceKeepsPhasesButNoOpEvents) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto res = run_trainscope(tiny_run(db, "--no-trace --json"));
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("\"throughput_median\""), std::string::npos) << res.out;
  store::Reader r(db);
  for (const auto& e : r.events(1)) EXPECT_NE(e.kind, "op");
  EXPECT_FALSE(r.phases(1).empty());
}

// Throughput names its unit and is the sustained rate (docs/formulas.md, "Throughput"): the
// timed iterations' work over their time. The transformer's headline counts tokens (its batch is
// a token budget), and every rate's unit says what it counts.
TEST(Cli, ThroughputIsSustainedInTheWorkloadsUnit) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto res = run_trainscope(
      "run transformer --preset tiny --iters 4 --warmup 1 --threads 1 --eval-batches 0 --db " + db.string());
  ASSERT_EQ(res.exit_code, 0) << res.out;
  store::Reader r(db);
  double samples = 0, tokens = 0, seconds = 0;
  std::set<int64_t> timed;
  for (const auto& it : r.iterations(1)) {
    if (it.warmup) continue;
    timed.insert(it.index);
    samples += static_cast<double>(it.samples);
    seconds += static_cast<double>(it.end_ns - it.start_ns) * 1e-9;
  }
  std::map<std::string, std::string> units;
  for (const auto& m : r.metrics(1)) {
    if (m.name == "tokens" && timed.contains(m.iteration)) tokens += m.value;
    if (m.iteration < 0) units[m.name] = m.unit;
  }
  const auto m = metrics_of(r, 1);
  ASSERT_GT(seconds, 0);
  EXPECT_NEAR(m.at("throughput"), samples / seconds, 1e-6 * m.at("throughput"));
  EXPECT_NEAR(m.at("tokens_per_s"), tokens / seconds, 1e-6 * m.at("tokens_per_s"));
  EXPECT_EQ(m.at("headline_throughput"), m.at("tokens_per_s"));
  EXPECT_EQ(units["headline_throughput"], "tokens/s");
  EXPECT_EQ(units["throughput"], "sentence pairs/s");
  EXPECT_EQ(units["throughput_median"], "sentence pairs/s");
  EXPECT_NE(res.out.find("tokens/s sustained"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("batch 256 tokens"), std::string::npos) << res.out;
  // The training's peak resident memory over the process before the model was built.
  EXPECT_GT(m.at("rss_peak_growth_bytes"), 0);
  const auto listed = run_trainscope("runs --db " + db.string());
  EXPECT_NE(listed.out.find("tokens/s"), std::string::npos) << listed.out;
}

// The step's roofline (docs/formulas.md): every class's self time, the data phase's and the
// overhead add up to the step's thread time; compute and memory ops declared their FLOPs and
// bytes; --roofline measured the machine; `show` sets the two against each other.
TEST(Cli, RooflineSetsTheStepAgainstTheMachine) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto res = run_trainscope(tiny_run(db, "--roofline"));
  ASSERT_EQ(res.exit_code, 0) << res.out;
  store::Reader r(db);
  const auto m = metrics_of(r, 1);
  EXPECT_EQ(m.at("roofline_iterations"), 3);
  const double step = m.at("roofline_step_ns");
  double parts = m.at("roofline_data_ns") + m.at("roofline_overhead_ns");
  for (const char* c : {"compute", "memory", "reorder", "other"}) parts += m.at(std::string("roofline_") + c + "_ns");
  EXPECT_GT(step, 0);
  EXPECT_NEAR(parts, step, 1.0);
  EXPECT_GT(m.at("roofline_compute_ns"), 0);
  EXPECT_GT(m.at("roofline_compute_flops"), 0);
  EXPECT_GT(m.at("roofline_memory_bytes"), 0);
  EXPECT_EQ(m.at("roofline_other_ns"), 0);  // resnet50 has no CTC or RoI op
  // One timed iteration's FLOPs: the tiny preset's is no single literal to check, but a second run
  // of the same shapes does the same work.
  ASSERT_EQ(run_trainscope(tiny_run(db)).exit_code, 0);
  EXPECT_EQ(metrics_of(r, 2).at("roofline_compute_flops"), m.at("roofline_compute_flops"));
  EXPECT_FALSE(metrics_of(r, 2).contains("machine_sgemm_gflops"));  // measured only when asked
  EXPECT_GT(m.at("machine_sgemm_gflops_1t"), 0);
  EXPECT_GT(m.at("machine_copy_gbps_1t"), 0);
  EXPECT_EQ(m.at("machine_peak_threads"), 1);  // the run's threads
  const auto show = run_trainscope("show 1 --db " + db.string());
  ASSERT_EQ(show.exit_code, 0) << show.out;
  for (const char* part : {"roofline", "GFLOP/s", "% of SGEMM", "% of copy", "overhead"}) {
    EXPECT_NE(show.out.find(part), std::string::npos) << part << " missing from:\n" << show.out;
  }
  const auto unmeasured = run_trainscope("show 2 --db " + db.string());
  EXPECT_NE(unmeasured.out.find("not measured (run with --roofline"), std::string::npos) << unmeasured.out;
}

// A count of one takes the singular (issue 38: "1 threads"): the summary, the progress lines.
TEST(Cli, ACountOfOneIsSingular) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto res = run_trainscope("run resnet50 --preset tiny --iters 1 --warmup 0 --threads 1 --eval-batches 0 --db " +
                                  db.string());
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find(" 1 thread "), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("sustained over 1 timed iteration\n"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("1/1 iteration,"), std::string::npos) << res.out;  // the progress, not on a terminal
  EXPECT_EQ(res.out.find("1 threads"), std::string::npos) << res.out;
  const auto two = run_trainscope("run resnet50 --preset tiny --iters 2 --warmup 0 --threads 2 --eval-batches 0 --db " +
                                  db.string());
  ASSERT_EQ(two.exit_code, 0) << two.out;
  EXPECT_NE(two.out.find(" 2 threads "), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("sustained over 2 timed iterations\n"), std::string::npos) << two.out;
}

// `show --json --layers N` is one JSON document (issue 38: the table used to follow it), the N
// slowest layers inside it; without --json the table follows the summary.
TEST(Cli, ShowJsonCarriesTheLayersInOneDocument) {
  TempDir dir;
  const auto db = dir / "t.db";
  ASSERT_EQ(run_trainscope(tiny_run(db)).exit_code, 0);
  const auto res = run_trainscope_split("show 1 --json --layers 3 --db " + db.string());
  ASSERT_EQ(res.exit_code, 0) << res.err;
  nlohmann::json doc;
  ASSERT_NO_THROW(doc = nlohmann::json::parse(res.out)) << res.out;
  EXPECT_EQ(doc.at("run_id"), 1);
  ASSERT_EQ(doc.at("layers").size(), 3u) << res.out;
  for (const auto& l : doc["layers"]) {
    EXPECT_FALSE(l.at("layer").get<std::string>().empty());
    EXPECT_GE(l.at("forward_ms").get<double>(), 0);
    EXPECT_GE(l.at("backward_ms").get<double>(), 0);
    EXPECT_TRUE(l.contains("parameters") && l.contains("activation_bytes") && l.contains("ops")) << l;
  }
  // What python3 -m json.tool reads, where there is one.
  std::ofstream(dir / "show.json") << res.out;
  const auto tool = run_command("command -v python3 >/dev/null || exit 77; python3 -m json.tool " +
                                (dir / "show.json").string() + " >/dev/null");
  EXPECT_TRUE(tool.exit_code == 0 || tool.exit_code == 77) << tool.out;
  // Without --layers the document has none; as text the table follows the summary.
  const auto plain = run_trainscope_split("show 1 --json --db " + db.string());
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("layers"));
  const auto text = run_trainscope("show 1 --layers 3 --db " + db.string());
  EXPECT_NE(text.out.find("layer (per timed iteration)"), std::string::npos) << text.out;
}

// `export --chrome` writes the stored run as Trace Event JSON (CPU-only run: CPU events and the
// memory counter track); a missing run is bad input and writes nothing.
TEST(Cli, ExportWritesAChromeTrace) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto run = run_trainscope(tiny_run(db));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const auto out = dir / "trace.json";
  const auto res = run_trainscope("export 1 --db " + db.string() + " --chrome " + out.string());
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("CPU events"), std::string::npos) << res.out;
  const std::string json = read_file(out);
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(json.find("\"cat\":\"cpu_op\",\"name\":\"conv2d\""), std::string::npos);
  EXPECT_NE(json.find("ProfilerStep#1"), std::string::npos);
  EXPECT_NE(json.find("memory by category"), std::string::npos);
  // Its progress, on stderr that is no terminal: plain lines, the last ending in a newline (issue 38:
  // the shell's prompt landed on the counter's line).
  const auto split = run_trainscope_split("export 1 --db " + db.string() + " --chrome " + out.string());
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_NE(split.err.find("events\n"), std::string::npos) << split.err;
  ASSERT_FALSE(split.err.empty());
  EXPECT_EQ(split.err.back(), '\n') << split.err;
  EXPECT_EQ(split.err.find('\r'), std::string::npos) << split.err;
  EXPECT_EQ(split.out.rfind("wrote ", 0), 0u) << split.out;
  const auto missing = run_trainscope("export 7 --db " + db.string() + " --chrome " + (dir / "x.json").string());
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_NE(missing.out.find("run 7 not found"), std::string::npos) << missing.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.json"));
}

TEST(Cli, ListShowsPublishedParameterCount) {
  const auto res = run_trainscope("list");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("25,557,032"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("batch 1 image "), std::string::npos) << res.out;  // faster_rcnn's (issue 38: "1 images")
  EXPECT_EQ(res.out.find("batch 1 images"), std::string::npos) << res.out;
  const auto js = run_trainscope("list --json");
  EXPECT_NE(js.out.find("25557032"), std::string::npos) << js.out;
}

// `list` answers at once (issue 38: it made the translation workloads' corpora, seconds of work,
// to count their parameters). CPU time, not wall time: the machine may be busy.
TEST(Cli, ListIsQuick) {
  const auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_CHILDREN, &u);
    const auto s = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
    };
    return s(u.ru_utime) + s(u.ru_stime);
  };
  const double before = cpu_seconds();
  const auto res = run_trainscope("list");
  const double took = cpu_seconds() - before;
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("63,082,496"), std::string::npos) << res.out;  // transformer base, counted
  EXPECT_LT(took, 1.0) << "trainscope list took " << took << " s of CPU time";
}

TEST(Cli, LearnersFlagSetsA3csThreads) {
  TempDir dir;
  const auto db = dir / "a.db";
  for (int learners : {1, 3}) {
    const auto res = run_trainscope("run a3c --preset tiny --iters 1 --warmup 0 --eval-batches 0 --learners " +
                                    std::to_string(learners) + " --db " + db.string());
    ASSERT_EQ(res.exit_code, 0) << res.out;
  }
  store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 2u);
  for (size_t i = 0; i < runs.size(); ++i) {
    const int expected = i == 0 ? 1 : 3;
    const auto m = metrics_of(r, runs[i].id);
    ASSERT_TRUE(m.contains("learners"));
    EXPECT_EQ(m.at("learners"), expected);
    EXPECT_NE(runs[i].config_json.find("\"learners\":" + std::to_string(expected)), std::string::npos)
        << runs[i].config_json;
    // Each learner reports its own time split, and there are no more learners than asked for.
    std::set<std::string> names;
    for (const auto& row : r.metrics(runs[i].id)) names.insert(row.name);
    EXPECT_TRUE(names.contains("learner." + std::to_string(expected - 1) + ".updates"));
    EXPECT_FALSE(names.contains("learner." + std::to_string(expected) + ".updates"));
  }
}

// --eval-every: the quality after every 3rd timed iteration, stored with that iteration; the time
// to quality is the training time (warm-up in, evaluations out) up to the first evaluation at
// or past the target. BLEU is never below 0 (reached at the first) nor above 1 (never reached).
TEST(Cli, EvalEveryStoresTheQualityCurveAndTheTimeToQuality) {
  TempDir dir;
  const auto db = dir / "q.db";
  for (const std::string target : {"0", "1.5"}) {
    const auto res =
        run_trainscope("run transformer --preset tiny --iters 6 --warmup 1 --eval-batches 1 --eval-every 3 "
                       "--quality-target " +
                       target + " --db " + db.string());
    ASSERT_EQ(res.exit_code, 0) << res.out;
    EXPECT_NE(res.out.find(target == "0" ? "to quality     " : "1.5 not reached in any evaluation"), std::string::npos)
        << res.out;
  }
  store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) {
    std::vector<int64_t> evaluated;
    for (const auto& m : r.metrics(run.id)) {
      if (m.name == "bleu" && m.iteration >= 0) evaluated.push_back(m.iteration);
    }
    EXPECT_EQ(evaluated, (std::vector<int64_t>{3, 6})) << "after timed iterations 3 and 6";
    EXPECT_NE(run.config_json.find("\"eval_every\":3"), std::string::npos) << run.config_json;
  }
  const auto reached = metrics_of(r, runs[0].id), missed = metrics_of(r, runs[1].id);
  double first_four_s = 0;  // iterations 0..3: the warm-up and three timed
  for (const auto& it : r.iterations(runs[0].id)) {
    if (it.index <= 3) first_four_s += static_cast<double>(it.end_ns - it.start_ns) * 1e-9;
  }
  EXPECT_EQ(reached.at("quality_target"), 0);
  EXPECT_EQ(reached.at("iterations_to_quality"), 4);
  EXPECT_NEAR(reached.at("time_to_quality_s"), first_four_s, 1e-6);
  EXPECT_EQ(missed.at("quality_target"), 1.5);
  EXPECT_FALSE(missed.contains("time_to_quality_s"));
}

TEST(Cli, BadInputExitsTwoAndWritesNothing) {
  TempDir dir;
  const auto db = dir / "sub" / "t.db";
  const std::vector<std::string> bad = {
      "run nosuchmodel --db " + db.string(),
      "run resnet50 --preset huge --db " + db.string(),
      "run resnet50 --batch 0 --db " + db.string(),
      "run resnet50 --batch -3 --db " + db.string(),
      "run resnet50 --iters 0 --db " + db.string(),
      "run resnet50 --iters abc --db " + db.string(),
      "run resnet50 --device tpu --db " + db.string(),
      "run resnet50 --data imagenet --iters 1 --db " + db.string(),
      "run resnet50 --learners 2 --db " + db.string(),  // only a3c has learner threads
      "run a3c --learners 0 --db " + db.string(),
      "run --db " + db.string(),
      "frobnicate",
  };
  for (const auto& args : bad) {
    const auto res = run_trainscope(args);
    EXPECT_EQ(res.exit_code, 2) << args << "\n" << res.out;
    EXPECT_FALSE(res.out.empty()) << args << ": bad input needs a message";
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "sub")) << "bad input must write nothing";
}

// `srun -n 2 trainscope run ...` where srun gives the tasks no MPI rank (no --mpi=pmix, Slurm's
// MpiDefault none): each task would train alone and store a run of its own. Refused, saying how to
// start it, before anything is written (srun's own environment, SLURM_STEP_NUM_TASKS, stands in).
TEST(Cli, SrunTasksWithoutAnMpiRankAreRefused) {
  TempDir dir;
  const auto db = dir / "sub" / "t.db";
  for (const std::string args : {"run resnet50 --iters 1 --warmup 0 --eval-batches 0 --threads 1",
                                 "bench collectives --max-bytes 64 --iters 1"}) {
    const auto res = run_command("env -u PMIX_RANK -u PMI_SIZE -u OMPI_COMM_WORLD_SIZE SLURM_STEP_NUM_TASKS=2 " +
                                 std::string(TRAINSCOPE_BIN) + " " + args + " --db " + db.string());
    EXPECT_EQ(res.exit_code, 2) << args << "\n" << res.out;
    EXPECT_NE(res.out.find("srun started this as one of 2 tasks without giving it an MPI rank"), std::string::npos)
        << args << "\n" << res.out;
    EXPECT_NE(res.out.find("srun --mpi=pmix"), std::string::npos) << res.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "sub")) << "nothing written";
}

TEST(Cli, UnwritableOrForeignDbIsRejected) {
  TempDir dir;
  // A path below a regular file can never be created, even by root.
  std::ofstream(dir / "file") << "x";
  auto res = run_trainscope(tiny_run(dir / "file" / "t.db"));
  EXPECT_EQ(res.exit_code, 2) << res.out;

  // A foreign SQLite database is left untouched.
  const auto foreign = dir / "foreign.db";
  {
    sqlite3* h = nullptr;
    sqlite3_open(foreign.c_str(), &h);
    sqlite3_exec(h, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  const std::string before = read_file(foreign);
  res = run_trainscope(tiny_run(foreign));
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_EQ(read_file(foreign), before);

  // A db from a newer trainscope is refused with a clear message.
  const auto newer = dir / "newer.db";
  ASSERT_EQ(run_trainscope(tiny_run(newer, "--no-trace")).exit_code, 0);
  {
    sqlite3* h = nullptr;
    sqlite3_open(newer.c_str(), &h);
    sqlite3_exec(h, "PRAGMA user_version = 99;", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  res = run_trainscope(tiny_run(newer));
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_NE(res.out.find("99"), std::string::npos) << res.out;
  res = run_trainscope("show 1 --db " + newer.string());
  EXPECT_EQ(res.exit_code, 2) << res.out;
  res = run_trainscope("show 7 --db " + (dir / "missing.db").string());
  EXPECT_EQ(res.exit_code, 2) << res.out;
}

TEST(Cli, InterruptedRunIsKeptAndMarked) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto log = dir / "log.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    freopen(log.c_str(), "w", stderr);
    freopen("/dev/null", "w", stdout);
    execl(TRAINSCOPE_BIN, TRAINSCOPE_BIN, "run", "resnet50", "--preset", "tiny", "--iters", "100000", "--warmup", "0",
          "--threads", "1", "--db", db.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until it has stored its run row and done some iterations, then Ctrl-C.
  bool started = false;
  for (int i = 0; i < 600 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    started =
        read_file(log).find("iterations") != std::string::npos || read_file(log).find(" it ") != std::string::npos;
  }
  ASSERT_TRUE(started) << read_file(log);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << read_file(log);
  EXPECT_EQ(WEXITSTATUS(status), 130) << read_file(log);

  store::Reader r(db);
  const auto run = r.run(1);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status, store::RunStatus::interrupted);
  EXPECT_FALSE(r.iterations(1).empty());
  EXPECT_FALSE(r.memory_peak(1).empty());
}

TEST(Cli, FailedRunIsKeptAndMarked) {
  TempDir dir;
  // A data folder that exists (so the input checks pass) but holds corrupt files: the run
  // starts, fails while building its data, and is stored as failed with the reason.
  std::filesystem::create_directories(dir / "fm");
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                        "t10k-labels-idx1-ubyte.gz"}) {
    std::ofstream(dir / "fm" / f) << "not an idx file";
  }
  const auto db = dir / "t.db";
  const auto res = run_trainscope(tiny_run(db, "--data fashion-mnist:" + (dir / "fm").string()));
  EXPECT_EQ(res.exit_code, 1) << res.out;
  EXPECT_NE(res.out.find("failed"), std::string::npos) << res.out;
  store::Reader r(db);
  const auto run = r.run(1);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status, store::RunStatus::failed);
  EXPECT_NE(run->error.find("idx"), std::string::npos) << run->error;
  EXPECT_FALSE(r.environment(1).empty());
}

// OpenMP threads spin briefly at barriers (cli/openmp_waiting.h): trainscope sets GOMP_SPINCOUNT
// for a run unless the user chose a wait policy, which it keeps; the run's environment says which.
TEST(Cli, ARunRecordsTheOpenMpWaitPolicyItRanWith) {
  TempDir dir;
  const auto db = dir / "omp.db";
  const std::string clean = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT ";
  const std::string bin = std::string(TRAINSCOPE_BIN) +
                          " run resnet50 --preset tiny --iters 1 --warmup 0 --threads 1 --eval-batches 0 --db " +
                          db.string();
  for (const std::string& prefix : {clean, clean + "GOMP_SPINCOUNT=12345 ", clean + "OMP_WAIT_POLICY=active "}) {
    const auto res = run_command(prefix + bin);
    ASSERT_EQ(res.exit_code, 0) << prefix << "\n" << res.out;
  }
  store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 3u);
  const auto env_of = [&](int64_t run) {
    std::map<std::string, std::string> env;
    for (const auto& e : r.environment(run)) env[e.key] = e.value;
    return env;
  };
  const std::pair<std::string, std::string> expected[] = {
      {"unset", cli::kOpenMpSpinCount}, {"unset", "12345"}, {"active", "unset"}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto env = env_of(runs[i].id);
    EXPECT_EQ(env.at("env.OMP_WAIT_POLICY"), expected[i].first) << i;
    EXPECT_EQ(env.at("env.GOMP_SPINCOUNT"), expected[i].second) << i;
  }
}
