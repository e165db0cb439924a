// The Chrome trace export of a hand-made run: CPU events, GPU activities with launch flows,
// memory counters; what a trace viewer and Holistic Trace Analysis rely on.
#include "reports/chrome_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "store/error.h"
#include "store/reader.h"
#include "store/writer.h"

namespace fs = std::filesystem;
using namespace ts;

namespace {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> n{0};
    path_ = fs::temp_directory_path() / ("trainscope_reports_" + std::to_string(getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& s) const { return path_ / s; }

 private:
  fs::path path_;
};

int64_t make_run(const fs::path& db) {
  store::Writer w(db);
  store::RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cuda:0";
  const int64_t run = w.begin_run(info);
  const std::vector<store::EventRow> events = {
      {1000, 9000, "iteration", "", "iteration", "none", 1, 0},
      {1100, 5000, "forward", "", "phase", "none", 1, 0},
      {1200, 1800, "conv2d", "layer1.0.conv1", "op", "forward", 1, 0},
      {1300, 1400, "relu \"quoted\"", "", "op", "forward", 1, 3},
  };
  w.add_events(run, events);
  const std::vector<store::GpuActivityRow> gpu = {
      {1250, 1290, "api", "cudaLaunchKernel", "", "layer1.0.conv1", "conv2d", "forward", -1, 4242, 17, 1, 0},
      {1500, 2500, "kernel", "implicit_gemm<float>", "grid 1x1x1 block 128x1x1 regs 64", "layer1.0.conv1", "conv2d",
       "forward", 0, 7, 17, 1, 0},
      {2600, 2700, "memcpy", "memcpy DtoH", "", "", "", "none", 0, 7, 18, 1, 4096},
      {1000, 1000, "memory", "allocate", "device", "", "", "none", 0, 7, 0, -1, 1 << 20},
      {8000, 8000, "memory", "free", "device", "", "", "none", 0, 7, 0, -1, -(1 << 20)},
  };
  w.add_gpu_activities(run, gpu);
  const std::vector<store::MemoryPoint> memory = {
      {900, "weights", 100}, {900, "activations", 0}, {2000, "weights", 100}, {2000, "activations", 50}};
  w.add_memory_timeline(run, memory);
  w.finish_run(run, store::RunStatus::completed, "2026-11-22T00:00:00Z", "");
  return run;
}

nlohmann::json load(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

}  // namespace

TEST(ChromeTrace, ExportsCpuGpuFlowsAndCounters) {
  TempDir dir;
  const fs::path db = dir / "r.db";
  const int64_t run = make_run(db);
  const fs::path out = dir / "trace.json";
  const auto stats = reports::write_chrome_trace(db, run, out);
  EXPECT_EQ(stats.cpu_events, 4);
  EXPECT_EQ(stats.gpu_activities, 3);  // api, kernel, memcpy (memory records are counters)
  EXPECT_EQ(stats.flows, 1);           // the kernel's launch; the copy had no API record
  EXPECT_EQ(stats.counters, 4);        // two device-memory points, two ledger instants

  const auto j = load(out);
  EXPECT_EQ(j["otherData"]["producer"], "trainscope");
  EXPECT_EQ(j["otherData"]["origin_ns"], 900);
  std::map<std::string, nlohmann::json> by_name;
  std::multiset<std::string> phases;
  for (const auto& e : j["traceEvents"]) {
    phases.insert(e["ph"].get<std::string>());
    if (e["ph"] == "X") by_name[e["name"].get<std::string>()] = e;
  }
  ASSERT_TRUE(by_name.contains("ProfilerStep#1"));  // iterations under the profilers' name
  EXPECT_EQ(by_name["ProfilerStep#1"]["cat"], "user_annotation");
  EXPECT_DOUBLE_EQ(by_name["ProfilerStep#1"]["ts"].get<double>(), 0.1);  // (1000 - 900) ns in us
  EXPECT_DOUBLE_EQ(by_name["ProfilerStep#1"]["dur"].get<double>(), 8.0);
  const auto& conv = by_name.at("conv2d");
  EXPECT_EQ(conv["cat"], "cpu_op");
  EXPECT_EQ(conv["args"]["layer"], "layer1.0.conv1");
  EXPECT_EQ(conv["args"]["pass"], "forward");
  EXPECT_TRUE(by_name.contains("relu \"quoted\""));  // escaped and read back
  const auto& kernel = by_name.at("implicit_gemm<float>");
  EXPECT_EQ(kernel["cat"], "kernel");
  EXPECT_EQ(kernel["pid"], 0);
  EXPECT_EQ(kernel["tid"], 7);
  EXPECT_EQ(kernel["args"]["correlation"], 17);
  EXPECT_EQ(kernel["args"]["layer"], "layer1.0.conv1");
  EXPECT_EQ(by_name.at("memcpy DtoH")["cat"], "gpu_memcpy");
  EXPECT_EQ(by_name.at("memcpy DtoH")["args"]["bytes"], 4096);
  EXPECT_EQ(by_name.at("cudaLaunchKernel")["cat"], "cuda_runtime");
  EXPECT_EQ(by_name.at("cudaLaunchKernel")["tid"], 4242);
  // One process per rank: a single-process run is rank 0's, apart from the GPU's and the API's.
  std::map<int64_t, std::string> process_names;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") process_names[e["pid"].get<int64_t>()] = e["args"]["name"];
  const int64_t rank0 = conv["pid"].get<int64_t>();
  EXPECT_EQ(process_names[rank0], "rank 0");
  EXPECT_EQ(by_name.at("ProfilerStep#1")["pid"], rank0);
  EXPECT_EQ(by_name.at("relu \"quoted\"")["pid"], rank0);
  EXPECT_EQ(process_names[0], "GPU 0");
  EXPECT_NE(by_name.at("cudaLaunchKernel")["pid"], rank0);
  EXPECT_NE(by_name.at("cudaLaunchKernel")["pid"], 0);
  EXPECT_EQ(stats.collectives, 0);
  EXPECT_EQ(phases.count("s"), 1U);
  EXPECT_EQ(phases.count("f"), 1U);
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "f") {
      EXPECT_EQ(e["id"], 17);
      EXPECT_EQ(e["pid"], 0);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.6);  // the kernel's start
    }
    if (e["ph"] == "C" && e["name"] == "memory by category" && e["ts"].get<double>() > 1.0) {
      EXPECT_EQ(e["args"]["activations"], 50);
    }
  }
}

// A data-parallel run: a process per rank with its threads, collectives on the thread that made
// them, memory counters per rank; the GPU stays as it was (rank 0's).
TEST(ChromeTrace, OneProcessPerRankWithItsCollectives) {
  TempDir dir;
  const fs::path db = dir / "r.db";
  int64_t run = 0;
  {
    store::Writer w(db);
    store::RunInfo info;
    info.workload = "resnet50";
    info.preset = "tiny";
    info.device = "cpu";
    info.ranks = 2;
    run = w.begin_run(info);
    const std::vector<store::EventRow> events = {
        {1000, 9000, "iteration", "", "iteration", "none", 1, 0, 0},
        {1200, 1800, "conv2d", "layer1.0.conv1", "op", "backward", 1, 0, 0},
        {1010, 9500, "iteration", "", "iteration", "none", 1, 0, 1},
        {1300, 1900, "conv2d", "layer1.0.conv1", "op", "backward", 1, 2, 1},
    };
    w.add_events(run, events);
    const std::vector<store::CollectiveRow> collectives = {
        {0, 1, 5, "all_reduce", "bucket 0", 4096, 2000, 2600},
        {1, 1, 5, "all_reduce", "bucket 0", 4096, 2100, 2700},
        {1, -1, 0, "broadcast", "parameters", 1 << 20, 900, 950},
    };
    w.add_collectives(run, collectives);
    w.add_memory_timeline(run, std::vector<store::MemoryPoint>{{950, "weights", 100, 0}, {960, "weights", 200, 1}});
    w.finish_run(run, store::RunStatus::completed, "2026-12-01T00:00:00Z", "");
  }
  const fs::path out = dir / "trace.json";
  const auto stats = reports::write_chrome_trace(db, run, out);
  EXPECT_EQ(stats.cpu_events, 4);
  EXPECT_EQ(stats.collectives, 3);
  EXPECT_EQ(stats.counters, 2);
  EXPECT_EQ(stats.gpu_activities, 0);

  const auto j = load(out);
  EXPECT_EQ(j["otherData"]["ranks"], 2);
  EXPECT_EQ(j["otherData"]["origin_ns"], 900);  // the broadcast
  std::map<int64_t, std::string> process_names;
  std::set<std::pair<int64_t, int64_t>> named_threads;
  std::map<int64_t, int64_t> sort_index;
  std::vector<nlohmann::json> x;
  std::map<int64_t, int64_t> counters;  // pid -> weights
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") process_names[e["pid"].get<int64_t>()] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "process_sort_index")
      sort_index[e["pid"].get<int64_t>()] = e["args"]["sort_index"];
    if (e["ph"] == "M" && e["name"] == "thread_name")
      named_threads.emplace(e["pid"].get<int64_t>(), e["tid"].get<int64_t>());
    if (e["ph"] == "X") x.push_back(e);
    if (e["ph"] == "C") counters[e["pid"].get<int64_t>()] = e["args"]["weights"];
  }
  ASSERT_EQ(process_names.size(), 2U);
  int64_t pid0 = -1, pid1 = -1;
  for (const auto& [pid, name] : process_names) (name == "rank 0" ? pid0 : pid1) = pid;
  ASSERT_NE(pid0, -1);
  ASSERT_NE(pid1, -1);
  EXPECT_EQ(process_names[pid1], "rank 1");
  EXPECT_NE(pid0, pid1);
  EXPECT_NE(pid0, 0);  // never a GPU's (device index) pid
  EXPECT_EQ(sort_index[pid0], 0);
  EXPECT_EQ(sort_index[pid1], 1);
  const std::set<std::pair<int64_t, int64_t>> threads = {{pid0, 0}, {pid0, 5}, {pid1, 0}, {pid1, 2}, {pid1, 5}};
  EXPECT_EQ(named_threads, threads);
  EXPECT_EQ(counters[pid0], 100);
  EXPECT_EQ(counters[pid1], 200);

  ASSERT_EQ(x.size(), 7U);
  int rank1_steps = 0, comm = 0;
  for (const auto& e : x) {
    if (e["name"] == "ProfilerStep#1" && e["pid"] == pid1) {
      ++rank1_steps;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.11);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 8.49);
    }
    if (e["name"] == "conv2d" && e["pid"] == pid1) {
      EXPECT_EQ(e["tid"], 2);
    }
    if (e["cat"] == "comm") {
      ++comm;
      if (e["name"] == "broadcast") {
        EXPECT_EQ(e["pid"], pid1);
        EXPECT_EQ(e["tid"], 0);
        EXPECT_EQ(e["args"]["bytes"], 1 << 20);
        EXPECT_EQ(e["args"]["label"], "parameters");
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.0);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.05);
      } else {
        EXPECT_EQ(e["name"], "all_reduce");
        EXPECT_EQ(e["tid"], 5);
        EXPECT_EQ(e["args"]["label"], "bucket 0");
        EXPECT_EQ(e["args"]["bytes"], 4096);
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), e["pid"] == pid0 ? 1.1 : 1.2);
      }
    }
  }
  EXPECT_EQ(rank1_steps, 1);
  EXPECT_EQ(comm, 3);
}

// Rank 1's host booted 5 s before rank 0's: its stamps are 5 s ahead. Set on rank 0's clock by the
// stored offsets (v11), its step lies beside rank 0's, and the trace says how far to trust that.
TEST(ChromeTrace, RanksOnSkewedClocksAreSetOnRankZerosClock) {
  TempDir dir;
  const fs::path db = dir / "r.db";
  constexpr int64_t kSkew = 5'000'000'000;
  int64_t run = 0;
  {
    store::Writer w(db);
    store::RunInfo info;
    info.workload = "resnet50";
    info.preset = "tiny";
    info.device = "cpu";
    info.ranks = 2;
    run = w.begin_run(info);
    const std::vector<store::EventRow> events = {
        {1000, 9000, "iteration", "", "iteration", "none", 1, 0, 0},
        {kSkew + 1010, kSkew + 9500, "iteration", "", "iteration", "none", 1, 0, 1},
    };
    w.add_events(run, events);
    const std::vector<store::CollectiveRow> collectives = {
        {1, 1, 5, "all_reduce", "bucket 0", 64, kSkew + 2100, kSkew + 2700}};
    w.add_collectives(run, collectives);
    const std::vector<store::RankClockRow> clocks = {{1, "start", kSkew, 40, 500, 80, 32},
                                                     {1, "end", kSkew, 60, 9'500, 120, 32}};
    w.add_rank_clocks(run, clocks);
    w.finish_run(run, store::RunStatus::completed, "2026-12-01T00:00:00Z", "");
  }
  const fs::path out = dir / "trace.json";
  reports::write_chrome_trace(db, run, out);
  const auto j = load(out);
  EXPECT_EQ(j["otherData"]["origin_ns"], 1000);  // rank 0's step: rank 1's no longer 5 s away
  EXPECT_EQ(j["otherData"]["clocks"]["aligned_to"], "rank 0");
  EXPECT_EQ(j["otherData"]["clocks"]["uncertainty_ns"], 60);
  EXPECT_EQ(j["otherData"]["clocks"]["ranks"]["1"]["offset_ns"], kSkew);
  int found = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["name"] == "ProfilerStep#1" && e["args"].contains("kind") && e["ts"].get<double>() > 0) {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.01);  // 1010 on rank 0's clock
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 8.49);
      ++found;
    }
    if (e["name"] == "all_reduce") {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.1);
      ++found;
    }
  }
  EXPECT_EQ(found, 2);
}

TEST(ChromeTrace, MissingRunAndUnwritablePathFailCleanly) {
  TempDir dir;
  const fs::path db = dir / "r.db";
  const int64_t run = make_run(db);
  EXPECT_THROW(reports::write_chrome_trace(db, run + 5, dir / "x.json"), store::StoreError);
  EXPECT_FALSE(fs::exists(dir / "x.json"));
  EXPECT_THROW(reports::write_chrome_trace(dir / "none.db", run, dir / "x.json"), store::StoreError);
  EXPECT_THROW(reports::write_chrome_trace(db, run, dir / "no" / "such" / "dir" / "x.json"), std::runtime_error);
  // Nothing half-written is left behind.
  for (const auto& e : fs::directory_iterator(dir / ""))
    EXPECT_EQ(e.path().string().find(".partial"), std::string::npos);
}
