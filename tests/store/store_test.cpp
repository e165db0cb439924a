// Tests for the SQLite results store (store/): round trips, file identity, migration, safety.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "store/open.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/writer.h"
#include "tests/store/error_kind.h"

namespace fs = std::filesystem;
using namespace ts::store;
using Kind = StoreError::Kind;

namespace {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("ts_store_test_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter++) + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    for (auto& e : fs::recursive_directory_iterator(path_, ec))
      fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

// Raw access for checks that must not go through the code under test.
struct RawDb {
  explicit RawDb(const fs::path& p, int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {
    if (sqlite3_open_v2(p.c_str(), &db, flags, nullptr) != SQLITE_OK) throw std::runtime_error("open failed");
  }
  ~RawDb() { sqlite3_close(db); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(msg);
    }
  }
  int64_t integer(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
    int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
    std::string v = sqlite3_step(s) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(s, 0)) : "";
    sqlite3_finalize(s);
    return v;
  }
  sqlite3* db = nullptr;
};

using ts::testing::error_kind;

RunInfo sample_run(const std::string& workload = "mlp") {
  RunInfo info;
  info.workload = workload;
  info.preset = "small";
  info.device = "cpu";
  info.batch_size = 64;
  info.iterations = 20;
  info.warmup = 3;
  info.threads = 2;
  info.seed = std::numeric_limits<uint64_t>::max() - 7;  // exercises the int64 bit pattern
  info.trace = false;
  info.parameter_count = 123456;
  info.started_at = "2026-11-22T04:30:00Z";
  info.command_line = "trainscope run mlp --preset small";
  info.config_json = R"({"lr":0.01,"layers":[64,32]})";
  return info;
}

EventRow event(int64_t start, const std::string& name, const std::string& layer = "fc1", int64_t it = 0) {
  return EventRow{start, start + 10, name, layer, "op", "forward", it, 1};
}

}  // namespace

TEST(StoreRecords, RunStatusStrings) {
  for (RunStatus s : {RunStatus::running, RunStatus::completed, RunStatus::failed, RunStatus::interrupted})
    EXPECT_EQ(parse_run_status(to_string(s)), s);
  EXPECT_EQ(to_string(RunStatus::interrupted), "interrupted");
  EXPECT_FALSE(parse_run_status("done").has_value());
}

TEST(StoreWriter, NewFileGetsIdentitySchemaAndParentDirectory) {
  TempDir dir;
  const fs::path db = dir / "a/b/results.db";
  { Writer w(db); }
  ASSERT_TRUE(fs::exists(db));
  RawDb raw(db, SQLITE_OPEN_READONLY);
  EXPECT_EQ(raw.integer("PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(raw.integer("PRAGMA application_id"), 0x54534350);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  for (const char* table : {"runs", "environment", "iterations", "phases", "strings", "events", "layers",
                            "kernel_summary", "memory_timeline", "memory_peak", "metrics", "samples"})
    EXPECT_EQ(
        raw.integer(std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") + table + "'"), 1)
        << table;
  for (const char* table : {"collectives", "comm_ops", "rank_breakdown", "collective_bench"})  // v4
    EXPECT_EQ(
        raw.integer(std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") + table + "'"), 1)
        << table;
  for (const char* table : {"timeline_index", "timeline_lanes", "timeline_tiles", "timeline_spans", "memory_changes",
                            "ps_staleness", "ps_servers"})  // v5, v6
    EXPECT_EQ(
        raw.integer(std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") + table + "'"), 1)
        << table;
  EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name='events_run_rank_start'"), 1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE name='events_run_start'"), 0);  // replaced in v4
  EXPECT_EQ(Reader(db).schema_version(), kSchemaVersion);
}

TEST(StoreWriter, MigratesEmptyFileFromVersionZero) {
  TempDir dir;
  const fs::path db = dir / "empty.db";
  write_bytes(db, "");
  EXPECT_EQ(error_kind([&] { Reader r(db); }), Kind::not_trainscope);  // nothing to read yet
  EXPECT_NO_THROW(Writer::check_target(db));
  {
    Writer w(db);
    w.begin_run(sample_run());
  }
  RawDb raw(db, SQLITE_OPEN_READONLY);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.integer("PRAGMA application_id"), kApplicationId);
  Reader r(db);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  EXPECT_EQ(r.runs().size(), 1u);
  // Reopening an up-to-date file does not migrate again.
  { Writer w(db); }
  EXPECT_EQ(Reader(db).runs().size(), 1u);
}

TEST(StoreWriter, RoundTripsEveryRecordType) {
  TempDir dir;
  const fs::path db = dir / "rt.db";
  const RunInfo info = sample_run();
  const std::vector<EnvEntry> env = {{"os", "linux"}, {"cpu", "x86"}, {"os", "Linux 6.1"}};
  const std::vector<IterationRow> iters = {{0, true, 0, 100, 64, 2.5}, {1, false, 100, 250, 64, 2.25}};
  const std::vector<PhaseRow> phases = {{1, "backward", 150, 240}, {0, "forward", 0, 50}, {1, "forward", 100, 150}};
  const std::vector<EventRow> events = {{5, 9, "gemm", "fc1", "op", "forward", 0, 3},
                                        {1, 4, "relu", "", "op", "", -1, 0}};
  const std::vector<LayerRow> layers = {{"fc1", "Linear", 20, 1.5e6, 3.25e6, 1 << 20, 4160},
                                        {"act", "ReLU", 20, 2e5, 1e5, 0, 0}};
  const std::vector<OpSummaryRow> ops = {{"cpu", "gemm", 40, 9000, 225.0, 200.5, 100, 900, 12000},
                                         {"cuda:0", "sgemm_kernel", 7, 700, 100.0, 99.0, 90, 120, 700}};
  const std::vector<MemoryPoint> mem = {{20, "activations", 4096}, {10, "parameters", 1024}};
  const std::vector<MemoryPeakRow> peaks = {{"activations", 8192, 30}, {"total", 9216, 30}};
  const std::vector<MetricRow> metrics = {{"throughput", 1234.5, "samples/s", -1}, {"loss", 0.5, "", 3}};
  const std::vector<SampleRow> samples = {{200, "rss", 1e8}, {100, "cpu_percent", 180.5}};
  const std::vector<GpuActivityRow> gpu = {
      {300, 350, "kernel", "sgemm_128x64", "grid 8x1x1 block 256x1x1 regs 96", "fc1", "linear", "forward", 0, 7, 42, 1,
       0},
      {290, 295, "memcpy", "memcpy HtoD", "", "", "", "none", 0, 7, 41, 1, 4096},
      {280, 400, "api", "cudaLaunchKernel", "", "fc1", "linear", "forward", -1, 1234, 42, 1, 0}};
  const std::vector<GpuBreakdownRow> gpu_b = {{0, 1, 290, 350, 50, 0, 5, 0, 0, 0, 55, 5}};
  const std::vector<CopySummaryRow> copies = {{"cuda:0", "memcpy HtoD", 1, 4096, 5}};

  int64_t id = 0;
  {
    Writer w(db);
    id = w.begin_run(info);
    w.add_environment(id, env);
    w.add_iterations(id, iters);
    w.add_phases(id, phases);
    w.add_events(id, events);
    w.add_layers(id, layers);
    w.add_op_summary(id, ops);
    w.add_memory_timeline(id, mem);
    w.add_memory_peak(id, peaks);
    w.add_metrics(id, metrics);
    w.add_samples(id, samples);
    w.add_gpu_activities(id, gpu);
    w.add_gpu_breakdown(id, gpu_b);
    w.add_copy_summary(id, copies);
    w.finish_run(id, RunStatus::failed, "2026-11-22T04:31:00Z", "out of memory");
  }
  Reader r(db);
  const auto run = r.run(id);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->id, id);
  EXPECT_EQ(run->workload, info.workload);
  EXPECT_EQ(run->preset, info.preset);
  EXPECT_EQ(run->device, info.device);
  EXPECT_EQ(run->batch_size, info.batch_size);
  EXPECT_EQ(run->iterations, info.iterations);
  EXPECT_EQ(run->warmup, info.warmup);
  EXPECT_EQ(run->threads, info.threads);
  EXPECT_EQ(run->seed, info.seed);
  EXPECT_EQ(run->trace, info.trace);
  EXPECT_EQ(run->parameter_count, info.parameter_count);
  EXPECT_EQ(run->started_at, info.started_at);
  EXPECT_EQ(run->command_line, info.command_line);
  EXPECT_EQ(run->config_json, info.config_json);
  EXPECT_EQ(run->status, RunStatus::failed);
  EXPECT_EQ(run->ended_at, "2026-11-22T04:31:00Z");
  EXPECT_EQ(run->error, "out of memory");
  EXPECT_FALSE(r.run(id + 100).has_value());

  const auto env_back = r.environment(id);  // later value for a repeated key wins
  ASSERT_EQ(env_back.size(), 2u);
  EXPECT_EQ(env_back[0].key, "os");
  EXPECT_EQ(env_back[0].value, "Linux 6.1");
  EXPECT_EQ(env_back[1].key, "cpu");

  const auto it = r.iterations(id);
  ASSERT_EQ(it.size(), 2u);
  EXPECT_EQ(it[0].index, 0);
  EXPECT_TRUE(it[0].warmup);
  EXPECT_EQ(it[1].start_ns, 100);
  EXPECT_EQ(it[1].end_ns, 250);
  EXPECT_EQ(it[1].samples, 64);
  EXPECT_DOUBLE_EQ(it[1].loss, 2.25);

  const auto ph = r.phases(id);
  ASSERT_EQ(ph.size(), 3u);
  EXPECT_EQ(ph[0].phase, "forward");
  EXPECT_EQ(ph[0].iteration, 0);
  EXPECT_EQ(ph[1].phase, "forward");
  EXPECT_EQ(ph[2].phase, "backward");
  EXPECT_EQ(ph[2].start_ns, 150);
  EXPECT_EQ(ph[2].end_ns, 240);

  const auto ev = r.events(id);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].name, "relu");  // ordered by start
  EXPECT_EQ(ev[0].layer, "");
  EXPECT_EQ(ev[0].pass, "");
  EXPECT_EQ(ev[0].iteration, -1);
  EXPECT_EQ(ev[1].start_ns, 5);
  EXPECT_EQ(ev[1].end_ns, 9);
  EXPECT_EQ(ev[1].name, "gemm");
  EXPECT_EQ(ev[1].layer, "fc1");
  EXPECT_EQ(ev[1].kind, "op");
  EXPECT_EQ(ev[1].pass, "forward");
  EXPECT_EQ(ev[1].iteration, 0);
  EXPECT_EQ(ev[1].thread, 3);
  EXPECT_EQ(r.event_count(id), 2);

  const auto la = r.layers(id);
  ASSERT_EQ(la.size(), 2u);
  EXPECT_EQ(la[0].layer, "fc1");
  EXPECT_EQ(la[0].op_types, "Linear");
  EXPECT_EQ(la[0].calls, 20);
  EXPECT_DOUBLE_EQ(la[0].forward_ns, 1.5e6);
  EXPECT_DOUBLE_EQ(la[0].backward_ns, 3.25e6);
  EXPECT_EQ(la[0].activation_bytes, 1 << 20);
  EXPECT_EQ(la[0].parameter_count, 4160);
  EXPECT_EQ(la[1].layer, "act");

  const auto op = r.op_summary(id);
  ASSERT_EQ(op.size(), 2u);
  EXPECT_EQ(op[0].device, "cpu");
  EXPECT_EQ(op[0].name, "gemm");
  EXPECT_EQ(op[0].count, 40);
  EXPECT_EQ(op[0].total_ns, 9000);
  EXPECT_EQ(op[0].inclusive_ns, 12000);
  EXPECT_DOUBLE_EQ(op[0].mean_ns, 225.0);
  EXPECT_DOUBLE_EQ(op[0].median_ns, 200.5);
  EXPECT_EQ(op[0].min_ns, 100);
  EXPECT_EQ(op[0].max_ns, 900);
  EXPECT_EQ(op[1].device, "cuda:0");

  const auto mt = r.memory_timeline(id);
  ASSERT_EQ(mt.size(), 2u);
  EXPECT_EQ(mt[0].t_ns, 10);  // by time
  EXPECT_EQ(mt[0].category, "parameters");
  EXPECT_EQ(mt[0].live_bytes, 1024);
  EXPECT_EQ(mt[1].category, "activations");

  const auto pk = r.memory_peak(id);
  ASSERT_EQ(pk.size(), 2u);
  EXPECT_EQ(pk[0].category, "activations");
  EXPECT_EQ(pk[0].bytes, 8192);
  EXPECT_EQ(pk[0].t_ns, 30);

  const auto me = r.metrics(id);
  ASSERT_EQ(me.size(), 2u);
  EXPECT_EQ(me[0].name, "throughput");
  EXPECT_DOUBLE_EQ(me[0].value, 1234.5);
  EXPECT_EQ(me[0].unit, "samples/s");
  EXPECT_EQ(me[0].iteration, -1);
  EXPECT_EQ(me[1].iteration, 3);

  const auto sa = r.samples(id);
  ASSERT_EQ(sa.size(), 2u);
  EXPECT_EQ(sa[0].name, "cpu_percent");
  EXPECT_DOUBLE_EQ(sa[0].value, 180.5);
  EXPECT_EQ(sa[1].t_ns, 200);

  const auto ga = r.gpu_activities(id);
  ASSERT_EQ(ga.size(), 3u);
  EXPECT_EQ(ga[0].kind, "api");  // by start
  EXPECT_EQ(ga[0].device, -1);
  EXPECT_EQ(ga[0].stream, 1234);
  EXPECT_EQ(ga[1].name, "memcpy HtoD");
  EXPECT_EQ(ga[1].bytes, 4096);
  EXPECT_EQ(ga[2].name, "sgemm_128x64");
  EXPECT_EQ(ga[2].detail, "grid 8x1x1 block 256x1x1 regs 96");
  EXPECT_EQ(ga[2].layer, "fc1");
  EXPECT_EQ(ga[2].op, "linear");
  EXPECT_EQ(ga[2].pass, "forward");
  EXPECT_EQ(ga[2].correlation, 42);
  EXPECT_EQ(ga[2].iteration, 1);
  EXPECT_EQ(r.gpu_activities(id, 290, 300).size(), 2u);
  EXPECT_EQ(r.gpu_activity_count(id), 3);
  const auto gb = r.gpu_breakdown(id);
  ASSERT_EQ(gb.size(), 1u);
  EXPECT_EQ(gb[0].iteration, 1);
  EXPECT_EQ(gb[0].busy_ns, 55);
  EXPECT_EQ(gb[0].idle_ns, 5);
  const auto cs = r.copy_summary(id);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].bytes, 4096);
}

// A version-1 file (before the GPU tables): the reader reads it as it is (no GPU rows, layers
// without GPU time); a writer migrates it to the current version keeping every row.
TEST(StoreWriter, MigratesVersionOneFileKeepingRows) {
  TempDir dir;
  const fs::path db = dir / "v1.db";
  {
    RawDb raw(db);
    raw.exec(std::string(ts::store::detail::migration_sql(0)));
    raw.exec("PRAGMA user_version = 1");
    raw.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
    raw.exec(
        "INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
        "parameter_count, started_at, command_line, config_json, status) VALUES ('resnet50', 'tiny', 'cpu', 8, 2, 1, "
        "1, 1, 1, 100, '2026-11-22T00:00:00Z', 'trainscope run', '{}', 'completed')");
    raw.exec("INSERT INTO layers (run_id, layer, op_types, calls, forward_ns, backward_ns, activation_bytes, "
             "parameter_count) VALUES (1, 'conv1', 'conv2d', 2, 10.0, 20.0, 64, 9)");
  }
  {
    Reader r(db);
    EXPECT_EQ(r.schema_version(), 1);
    ASSERT_EQ(r.layers(1).size(), 1u);
    EXPECT_DOUBLE_EQ(r.layers(1)[0].gpu_forward_ns, 0.0);
    EXPECT_TRUE(r.gpu_activities(1).empty());
    EXPECT_TRUE(r.gpu_breakdown(1).empty());
    EXPECT_EQ(r.gpu_activity_count(1), 0);
  }
  { Writer w(db); }
  Reader r(db);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  ASSERT_EQ(r.runs().size(), 1u);
  const auto layers = r.layers(1);
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0].layer, "conv1");
  EXPECT_DOUBLE_EQ(layers[0].backward_ns, 20.0);
  EXPECT_DOUBLE_EQ(layers[0].gpu_backward_ns, 0.0);
  {
    Writer w(db);
    const std::vector<GpuBreakdownRow> b = {{0, 3, 100, 400, 220, 150, 20, 0, 70, 80, 320, 80}};
    w.add_gpu_breakdown(1, b);
  }
  ASSERT_EQ(Reader(db).gpu_breakdown(1).size(), 1u);
}

TEST(StoreWriter, ManyRunsInOneFileAndDelete) {
  TempDir dir;
  const fs::path db = dir / "many.db";
  std::vector<int64_t> ids;
  {
    Writer w(db);
    for (int i = 0; i < 5; ++i) {
      ids.push_back(w.begin_run(sample_run("w" + std::to_string(i))));
      std::vector<EventRow> ev;
      for (int k = 0; k <= i; ++k) ev.push_back(event(k, "op" + std::to_string(i)));
      w.add_events(ids.back(), ev);
      const std::vector<MetricRow> m = {{"run_index", double(i), "", -1}};
      w.add_metrics(ids.back(), m);
      w.finish_run(ids.back(), RunStatus::completed, "2026-11-22T05:00:00Z", "");
    }
  }
  {
    Writer w(db);  // a second session appends to the same file
    ids.push_back(w.begin_run(sample_run("later")));
  }
  Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 6u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(runs[i].id, ids[i]);
    EXPECT_EQ(runs[i].workload, "w" + std::to_string(i));
    EXPECT_EQ(runs[i].status, RunStatus::completed);
    EXPECT_EQ(r.event_count(ids[i]), int64_t(i + 1));
    EXPECT_EQ(r.events(ids[i]).front().name, "op" + std::to_string(i));
    EXPECT_DOUBLE_EQ(r.metrics(ids[i]).at(0).value, double(i));
  }
  EXPECT_EQ(runs[5].workload, "later");
  EXPECT_EQ(runs[5].status, RunStatus::running);

  {
    Writer w(db);
    w.delete_run(ids[2]);
    EXPECT_EQ(error_kind([&] { w.delete_run(ids[2]); }), Kind::not_found);
  }
  Reader r2(db);
  EXPECT_EQ(r2.runs().size(), 5u);
  EXPECT_FALSE(r2.run(ids[2]).has_value());
  EXPECT_EQ(r2.event_count(ids[2]), 0);  // cascaded
  EXPECT_TRUE(r2.metrics(ids[2]).empty());
  EXPECT_EQ(r2.event_count(ids[3]), 4);
  RawDb raw(db, SQLITE_OPEN_READONLY);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM events"), 1 + 2 + 4 + 5);
}

TEST(StoreWriter, MissingRunIsNotFound) {
  TempDir dir;
  Writer w(dir / "x.db");
  const std::vector<EventRow> ev = {event(1, "a")};
  EXPECT_EQ(error_kind([&] { w.add_events(42, ev); }), Kind::not_found);
  EXPECT_EQ(error_kind([&] { w.finish_run(42, RunStatus::completed, "", ""); }), Kind::not_found);
  EXPECT_NO_THROW(w.add_events(42, std::span<const EventRow>{}));  // nothing to do
}

TEST(StoreWriter, EventStringsAreInternedOnce) {
  TempDir dir;
  const fs::path db = dir / "strings.db";
  std::vector<EventRow> ev;
  for (int i = 0; i < 3000; ++i)
    ev.push_back(EventRow{i, i + 5, "name" + std::to_string(i % 7), "layer" + std::to_string(i % 3), "op",
                          i % 2 ? "forward" : "backward", i / 100, 0});
  const std::vector<MemoryPoint> mem = {{1, "op", 10}, {2, "activations", 20}};
  {
    Writer w(db);
    const int64_t a = w.begin_run(sample_run());
    w.add_events(a, ev);
    w.add_events(a, ev);  // same strings again, from the in-memory cache
  }
  {
    Writer w(db);  // fresh cache: must find the stored ids, not insert duplicates
    const int64_t b = w.begin_run(sample_run());
    w.add_events(b, ev);
    w.add_memory_timeline(b, mem);
  }
  RawDb raw(db, SQLITE_OPEN_READONLY);
  // 7 names + 3 layers + "op" + "forward" + "backward" + "activations"
  EXPECT_EQ(raw.integer("SELECT count(*) FROM strings"), 7 + 3 + 1 + 2 + 1);
  EXPECT_EQ(raw.integer("SELECT count(DISTINCT value) FROM strings"), 14);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM events"), 9000);
  Reader r(db);
  const auto back = r.events(2);
  ASSERT_EQ(back.size(), ev.size());
  for (size_t i = 0; i < ev.size(); ++i) {
    ASSERT_EQ(back[i].name, ev[i].name);
    ASSERT_EQ(back[i].layer, ev[i].layer);
    ASSERT_EQ(back[i].pass, ev[i].pass);
  }
}

TEST(StoreWriter, ForeignSqliteDatabaseIsRejectedAndUntouched) {
  TempDir dir;
  const fs::path db = dir / "foreign.db";
  {
    RawDb raw(db);
    raw.exec("CREATE TABLE recipes (id INTEGER PRIMARY KEY, title TEXT); INSERT INTO recipes VALUES (1, 'soup');");
  }
  const std::string before = read_bytes(db);
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(error_kind([&] { Writer w(db); }), Kind::not_trainscope);
  EXPECT_EQ(error_kind([&] { Reader r(db); }), Kind::not_trainscope);
  EXPECT_EQ(error_kind([&] { Writer::check_target(db); }), Kind::not_trainscope);
  EXPECT_EQ(read_bytes(db), before);
  EXPECT_FALSE(fs::exists(dir / "foreign.db-wal"));
  try {
    Writer w(db);
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("foreign.db"), std::string::npos) << e.what();
  }
}

TEST(StoreWriter, ForeignSqliteWithAppIdOnlyIsRejected) {
  TempDir dir;
  const fs::path db = dir / "other_app.db";
  { RawDb(db).exec("PRAGMA application_id = 1234;"); }  // no tables, but somebody else's id
  const std::string before = read_bytes(db);
  EXPECT_EQ(error_kind([&] { Writer w(db); }), Kind::not_trainscope);
  EXPECT_EQ(read_bytes(db), before);
}

TEST(StoreWriter, TextFileIsRejectedAndUntouched) {
  TempDir dir;
  for (const std::string& content :
       {std::string("hello, this is a text file\n"), std::string(5000, 'x'), std::string("SQL")}) {
    const fs::path db = dir / "notes.txt";
    write_bytes(db, content);
    EXPECT_EQ(error_kind([&] { Writer w(db); }), Kind::not_trainscope);
    EXPECT_EQ(error_kind([&] { Reader r(db); }), Kind::not_trainscope);
    EXPECT_EQ(error_kind([&] { Writer::check_target(db); }), Kind::not_trainscope);
    EXPECT_EQ(read_bytes(db), content);
  }
}

TEST(StoreWriter, NewerSchemaIsRejectedAndUntouched) {
  TempDir dir;
  const fs::path db = dir / "future.db";
  {
    RawDb raw(db);
    raw.exec("PRAGMA application_id = " + std::to_string(kApplicationId) + "; PRAGMA user_version = 99;");
    raw.exec("CREATE TABLE runs (id INTEGER PRIMARY KEY, hologram BLOB);");
  }
  const std::string before = read_bytes(db);
  EXPECT_EQ(error_kind([&] { Reader r(db); }), Kind::newer_schema);
  EXPECT_EQ(error_kind([&] { Writer::check_target(db); }), Kind::newer_schema);
  try {
    Writer w(db);
    ADD_FAILURE() << "expected newer_schema";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), Kind::newer_schema);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("99"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(kSchemaVersion)), std::string::npos) << msg;
  }
  EXPECT_EQ(read_bytes(db), before);
}

TEST(StoreReader, MissingFileIsNotFoundAndNotCreated) {
  TempDir dir;
  EXPECT_EQ(error_kind([&] { Reader r(dir / "nope.db"); }), Kind::not_found);
  EXPECT_FALSE(fs::exists(dir / "nope.db"));
}

TEST(StoreCheckTarget, MissingFileInWritableDirIsAcceptedAndNotCreated) {
  TempDir dir;
  EXPECT_NO_THROW(Writer::check_target(dir / "new.db"));
  EXPECT_NO_THROW(Writer::check_target(dir / "sub/deeper/new.db"));
  EXPECT_FALSE(fs::exists(dir / "new.db"));
  EXPECT_FALSE(fs::exists(dir / "sub"));
}

TEST(StoreCheckTarget, ExistingTrainscopeFileIsAcceptedUnchanged) {
  TempDir dir;
  const fs::path db = dir / "ok.db";
  {
    Writer w(db);
    w.begin_run(sample_run());
  }
  const std::string before = read_bytes(db);
  EXPECT_NO_THROW(Writer::check_target(db));
  EXPECT_EQ(read_bytes(db), before);
  EXPECT_FALSE(fs::exists(dir / "ok.db-wal"));
}

TEST(StoreCheckTarget, DirectoryPathIsRejected) {
  TempDir dir;
  fs::create_directories(dir / "adir");
  EXPECT_EQ(error_kind([&] { Writer::check_target(dir / "adir"); }), Kind::io);
  EXPECT_EQ(error_kind([&] { Writer::check_target(dir.path().string() + "/missing_dir/"); }), Kind::io);
  EXPECT_EQ(error_kind([&] { Writer w(dir / "adir"); }), Kind::io);
}

TEST(StoreCheckTarget, ParentIsARegularFileIsRejected) {
  TempDir dir;
  write_bytes(dir / "plain", "x");
  EXPECT_EQ(error_kind([&] { Writer::check_target(dir / "plain/results.db"); }), Kind::io);
  EXPECT_EQ(error_kind([&] { Writer::check_target(dir / "plain/a/b/results.db"); }), Kind::io);
  EXPECT_EQ(read_bytes(dir / "plain"), "x");
}

TEST(StoreCheckTarget, UnwritableDirectoryIsRejected) {
  TempDir dir;
  if (::geteuid() == 0) {
    // root passes access(W_OK) on a 0500 directory, so check a path that cannot be created instead:
    // one below a regular file (creating the parent must fail even for root).
    write_bytes(dir / "blocker", "");
    const fs::path target = dir / "blocker/sub/results.db";
    EXPECT_EQ(error_kind([&] { Writer::check_target(target); }), Kind::io);
    EXPECT_EQ(error_kind([&] { Writer w(target); }), Kind::io);
    EXPECT_TRUE(fs::is_regular_file(dir / "blocker"));
    return;
  }
  const fs::path locked = dir / "locked";
  fs::create_directories(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);  // 0500
  EXPECT_EQ(error_kind([&] { Writer::check_target(locked / "results.db"); }), Kind::io);
  EXPECT_EQ(error_kind([&] { Writer::check_target(locked / "sub/results.db"); }), Kind::io);
  EXPECT_EQ(error_kind([&] { Writer w(locked / "results.db"); }), Kind::io);
  EXPECT_FALSE(fs::exists(locked / "results.db"));
}

TEST(StoreWriter, UnfinishedRunStaysRunningAndReadable) {
  TempDir dir;
  const fs::path db = dir / "crash.db";
  int64_t id = 0;
  {
    Writer w(db);
    id = w.begin_run(sample_run());
    const std::vector<EventRow> ev = {event(1, "a"), event(2, "b")};
    w.add_events(id, ev);
  }  // no finish_run
  {
    Reader r(db);
    ASSERT_TRUE(r.run(id).has_value());
    EXPECT_EQ(r.run(id)->status, RunStatus::running);
    EXPECT_EQ(r.event_count(id), 2);
  }
  // A process killed mid-run (no destructors, WAL left behind) also leaves a readable file.
  const pid_t child = ::fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    try {
      auto* w = new Writer(db);  // deliberately leaked: the process dies without closing it
      const int64_t run = w->begin_run(sample_run("killed"));
      std::vector<EventRow> ev;
      for (int i = 0; i < 1000; ++i) ev.push_back(event(i, "k"));
      w->add_events(run, ev);
      ::_exit(0);
    } catch (...) {
      ::_exit(1);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].workload, "killed");
  EXPECT_EQ(runs[1].status, RunStatus::running);
  EXPECT_EQ(r.event_count(runs[1].id), 1000);
  Writer w(db);  // and it can still be written to
  w.finish_run(runs[1].id, RunStatus::interrupted, "2026-11-22T06:00:00Z", "killed");
  EXPECT_EQ(Reader(db).run(runs[1].id)->status, RunStatus::interrupted);
}

TEST(StoreWriter, IngestsManyEventsInStartOrder) {
  TempDir dir;
  const fs::path db = dir / "big.db";
  constexpr int kEvents = 200'000;
  std::vector<EventRow> ev;
  ev.reserve(kEvents);
  for (int i = 0; i < kEvents; ++i)
    ev.push_back(EventRow{int64_t(i) * 10, int64_t(i) * 10 + 7, "op" + std::to_string(i % 500),
                          "layer" + std::to_string(i % 50), "op", i % 3 ? "forward" : "backward", i / 1000, i % 2});
  std::mt19937 rng(7);
  std::shuffle(ev.begin(), ev.end(), rng);  // arrival order differs from time order
  int64_t id = 0;
  {
    Writer w(db);
    id = w.begin_run(sample_run());
    w.add_events(id, ev);  // spans several 50k-row transactions
  }
  Reader r(db);
  EXPECT_EQ(r.event_count(id), kEvents);
  const auto back = r.events(id);
  ASSERT_EQ(back.size(), size_t(kEvents));
  for (int i = 0; i < kEvents; ++i) {
    ASSERT_EQ(back[size_t(i)].start_ns, int64_t(i) * 10) << i;
    ASSERT_EQ(back[size_t(i)].name, "op" + std::to_string(i % 500)) << i;
  }
  // Window and limit.
  const auto window = r.events(id, 1000, 1990);
  ASSERT_EQ(window.size(), 100u);
  EXPECT_EQ(window.front().start_ns, 1000);
  EXPECT_EQ(window.back().start_ns, 1990);
  const auto limited = r.events(id, 5000, std::numeric_limits<int64_t>::max(), 3);
  ASSERT_EQ(limited.size(), 3u);
  EXPECT_EQ(limited[2].start_ns, 5020);
  EXPECT_TRUE(r.events(id, 0, 100, 0).empty());
}
