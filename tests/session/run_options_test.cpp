// The option table (session/run_options.h): a configuration with every option away from its
// default comes back the same through each path derived from the table (the command line, a
// suite, the ranks' document) and is stored as the reports read it. Two configurations, since
// one strategy's options are refused with the other's.
#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include <set>
#include <string>
#include <vector>

#include "cli/run_flags.h"
#include "cli/suite.h"
#include "session/run_options.h"

using namespace ts;
using session::RunConfig;
using json = nlohmann::json;

namespace {

// The number of members of an aggregate: the most initialisers T{...} accepts. A field added to
// RunConfig (or its nested options) changes it, and this test then asks for its declaration.
struct AnyField {
  template <class T>
  operator T() const;  // never defined: only used in unevaluated requires-expressions
};
template <class T, class... Fields>
constexpr size_t field_count() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; }) {
    return field_count<T, Fields..., AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

// Every field of both, one by one (the counts below keep this list whole).
void expect_same(const RunConfig& a, const RunConfig& b) {
  EXPECT_EQ(a.workload, b.workload);
  EXPECT_EQ(a.framework, b.framework);
  EXPECT_EQ(a.preset, b.preset);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.shard, b.shard);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.learners, b.learners);
  EXPECT_EQ(a.iterations, b.iterations);
  EXPECT_EQ(a.warmup, b.warmup);
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.eval_batches, b.eval_batches);
  EXPECT_EQ(a.eval_every, b.eval_every);
  EXPECT_EQ(a.quality_target, b.quality_target);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.roofline, b.roofline);
  EXPECT_EQ(a.json, b.json);
  EXPECT_EQ(a.db, b.db);
  EXPECT_EQ(a.flush_interval, b.flush_interval);
  EXPECT_EQ(a.lock_wait, b.lock_wait);
  EXPECT_EQ(a.stall_timeout, b.stall_timeout);
  EXPECT_EQ(a.command_line, b.command_line);
  EXPECT_EQ(a.suite.name, b.suite.name);
  EXPECT_EQ(a.suite.entry, b.suite.entry);
  EXPECT_EQ(a.suite.repeat, b.suite.repeat);
  EXPECT_EQ(a.nproc, b.nproc);
  EXPECT_EQ(a.hosts, b.hosts);
  EXPECT_EQ(a.hostfile, b.hostfile);
  EXPECT_EQ(a.mca, b.mca);
  EXPECT_EQ(a.strategy, b.strategy);
  const auto &dp = a.data_parallel, &dq = b.data_parallel;
  EXPECT_EQ(dp.bucket_mb, dq.bucket_mb);
  EXPECT_EQ(dp.overlap, dq.overlap);
  EXPECT_EQ(dp.order, dq.order);
  EXPECT_EQ(dp.priority, dq.priority);
  EXPECT_EQ(dp.partition_mb, dq.partition_mb);
  EXPECT_EQ(dp.cross_barrier, dq.cross_barrier);
  EXPECT_EQ(a.gpu_gradients, b.gpu_gradients);
  const auto &p = a.ps, &q = b.ps;
  EXPECT_EQ(p.servers, q.servers);
  EXPECT_EQ(p.dedicated, q.dedicated);
  EXPECT_EQ(p.server_hosts, q.server_hosts);
  EXPECT_EQ(p.mode, q.mode);
  EXPECT_EQ(p.staleness, q.staleness);
  EXPECT_EQ(p.priority, q.priority);
  EXPECT_EQ(p.chunk_mb, q.chunk_mb);
}

// Everything but the parameter server's options away from its default.
RunConfig all_reduce_config() {
  RunConfig c;
  c.workload = "seq2seq";
  c.framework = "pytorch";
  c.preset = "small";
  c.device = "cuda:1";
  c.data = "fashion-mnist:/data/fm";
  c.shard = "1/3";
  c.batch = 48;
  c.learners = 6;
  c.iterations = 123;
  c.warmup = 7;
  c.threads = 5;
  c.seed = 18446744073709551615ull;  // the largest seed: the rank's document keeps it whole
  c.eval_batches = 9;
  c.eval_every = 11;
  c.quality_target = 0.875;
  c.trace = false;
  c.roofline = true;
  c.json = true;
  c.db = "/tmp/runs/x.db";
  c.flush_interval = std::chrono::milliseconds(290);
  c.lock_wait = std::chrono::milliseconds(12500);
  c.stall_timeout = std::chrono::milliseconds(45000);
  c.command_line = "trainscope run seq2seq 'with quotes' and $dollars";
  c.suite = {"nightly", 3, 2};
  c.nproc = 4;
  c.hosts = "h1:2,h2:2";
  c.hostfile = "/etc/hosts.ts";
  c.mca = {{"btl", "self,tcp"}, {"plm_rsh_agent", "/x/rsh agent"}};
  c.data_parallel = {.bucket_mb = 0.25,
                     .overlap = false,
                     .order = distributed::BucketOrder::reverse_registration,
                     .priority = true,
                     .partition_mb = 0.125,
                     .cross_barrier = false};
  c.gpu_gradients = distributed::GpuGradients::nccl;
  return c;
}

// The parameter server's options away from their defaults (the all-reduce's stay).
RunConfig ps_config() {
  RunConfig c = all_reduce_config();
  c.data_parallel = {};
  c.data_parallel.priority = true;
  c.gpu_gradients = {};
  c.strategy = RunConfig::Strategy::ps;
  c.ps = {.servers = 3,
          .dedicated = true,
          .server_hosts = "s1:2,s2:1",
          .mode = distributed::ps::PsMode::bounded,
          .staleness = 4,
          .priority = true,
          .chunk_mb = 0.5};
  return c;
}

// `trainscope run ARGS` through the flags derived from the table.
RunConfig from_flags(const std::vector<std::string>& args, const std::string& command_line) {
  CLI::App app;
  auto* run = app.add_subcommand("run");
  const cli::RunFlags flags(*run);
  std::vector<std::string> argv = {"trainscope", "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<const char*> raw;
  for (const auto& a : argv) raw.push_back(a.c_str());
  app.parse(static_cast<int>(raw.size()), raw.data());
  return flags.config(command_line);
}

const std::vector<std::string> kCommonFlags = {"seq2seq",
                                               "--framework",
                                               "pytorch",
                                               "--preset",
                                               "small",
                                               "--device",
                                               "cuda:1",
                                               "--data",
                                               "fashion-mnist:/data/fm",
                                               "--shard",
                                               "1/3",
                                               "--batch",
                                               "48",
                                               "--learners",
                                               "6",
                                               "--iters",
                                               "123",
                                               "--warmup",
                                               "7",
                                               "--threads",
                                               "5",
                                               "--seed",
                                               "18446744073709551615",
                                               "--eval-batches",
                                               "9",
                                               "--eval-every",
                                               "11",
                                               "--quality-target",
                                               "0.875",
                                               "--no-trace",
                                               "--roofline",
                                               "--json",
                                               "--db",
                                               "/tmp/runs/x.db",
                                               "--flush-interval",
                                               "0.29",
                                               "--lock-wait",
                                               "12.5",
                                               "--stall-timeout",
                                               "45",
                                               "--nproc",
                                               "4",
                                               "--hosts",
                                               "h1:2,h2:2",
                                               "--hostfile",
                                               "/etc/hosts.ts",
                                               "--mca",
                                               "btl=self,tcp",
                                               "--mca",
                                               "plm_rsh_agent=/x/rsh agent",
                                               "--priority"};

const std::string kCommonSuite = R"(
name = "nightly"
[[run]]
workload = "seq2seq"
framework = "pytorch"
preset = "small"
device = "cuda:1"
data = "fashion-mnist:/data/fm"
shard = "1/3"
batch = 48
learners = 6
iterations = 123
warmup = 7
threads = 5
seed = 9223372036854775807
eval_batches = 9
eval_every = 11
quality_target = 0.875
trace = false
roofline = true
nproc = 4
hosts = "h1:2,h2:2"
hostfile = "/etc/hosts.ts"
mca = ["btl=self,tcp", "plm_rsh_agent=/x/rsh agent"]
priority = true
)";

// What a suite cannot say (the command line's own options, the run's place in the suite) as a
// suite's run has them; the seed as TOML's integers reach.
RunConfig as_from_suite(RunConfig c) {
  const RunConfig defaults;
  c.json = defaults.json;
  c.db = "suite.db";
  c.flush_interval = defaults.flush_interval;
  c.lock_wait = defaults.lock_wait;
  c.stall_timeout = defaults.stall_timeout;
  c.command_line = "suite nightly.toml #1";
  c.suite = {"nightly", 1, 1};
  c.seed = 9223372036854775807ull;
  return c;
}

}  // namespace

// A new field must be declared in session/run_options.cpp (or be one of the few that are not
// options: the command line, the suite tag, ps.priority derived from --priority), compared in
// expect_same and set in the configurations above; then update the count.
TEST(RunOptions, EveryFieldIsCounted) {
  EXPECT_EQ(field_count<RunConfig>(), 32u);
  EXPECT_EQ(field_count<distributed::DataParallelOptions>(), 6u);
  EXPECT_EQ(field_count<distributed::ps::PsOptions>(), 7u);
  EXPECT_EQ(field_count<RunConfig::SuiteTag>(), 3u);
}

TEST(RunOptions, TheTwoConfigurationsMoveEveryOption) {
  const RunConfig defaults, a = all_reduce_config(), p = ps_config();
  for (const auto& o : session::run_options()) {
    EXPECT_TRUE(o.get(a) != o.get(defaults) || o.get(p) != o.get(defaults)) << o.name << " stays at its default";
  }
}

TEST(RunOptions, NamesAndKeysAreUnique) {
  std::set<std::string_view> names, keys;
  for (const auto& o : session::run_options()) {
    EXPECT_TRUE(names.insert(o.name).second) << o.name;
    if (!o.suite_key.empty()) {
      EXPECT_TRUE(keys.insert(o.suite_key).second) << o.suite_key;
    }
    EXPECT_EQ(o.stored == session::Stored::none, o.stored_key.empty()) << o.name;
    EXPECT_TRUE(o.get && o.set) << o.name;
  }
}

TEST(RunOptions, FlagsGiveTheConfiguration) {
  for (const bool ps : {false, true}) {
    SCOPED_TRACE(ps ? "ps" : "allreduce");
    RunConfig expected = ps ? ps_config() : all_reduce_config();
    std::vector<std::string> args = kCommonFlags;
    if (ps) {
      args.insert(args.end(), {"--strategy", "ps", "--servers", "3", "--dedicated-servers", "--server-hosts",
                               "s1:2,s2:1", "--ps-mode", "bounded", "--staleness", "4", "--chunk-mb", "0.5"});
    } else {
      args.insert(args.end(), {"--bucket-mb", "0.25", "--no-overlap", "--bucket-order", "reverse_registration",
                               "--partition-mb", "0.125", "--no-cross-barrier", "--gpu-gradients", "nccl"});
    }
    expected.suite = {};  // the command line has no suite
    expect_same(from_flags(args, expected.command_line), expected);
  }
}

TEST(RunOptions, SuiteKeysGiveTheConfiguration) {
  for (const bool ps : {false, true}) {
    SCOPED_TRACE(ps ? "ps" : "allreduce");
    const std::string text =
        kCommonSuite + (ps ? "strategy = \"ps\"\nservers = 3\ndedicated_servers = true\nserver_hosts = \"s1:2,s2:1\"\n"
                             "ps_mode = \"bounded\"\nstaleness = 4\nchunk_mb = 0.5\n"
                           : "bucket_mb = 0.25\noverlap = false\nbucket_order = \"reverse_registration\"\n"
                             "partition_mb = 0.125\ncross_barrier = false\ngpu_gradients = \"nccl\"\n");
    const cli::Suite suite = cli::parse_suite(text, "nightly.toml", "suite.db");
    ASSERT_EQ(suite.run_count(), 1u);
    expect_same(suite.run_at(0), as_from_suite(ps ? ps_config() : all_reduce_config()));
  }
}

// The ranks' configuration: everything but the launcher's own options, through one word of
// hex digits that no shell, mpirun or rsh agent changes.
TEST(RunOptions, TheRanksDocumentGivesTheConfigurationBack) {
  for (RunConfig c : {all_reduce_config(), ps_config()}) {
    const std::vector<std::string> args = cli::rank_arguments(c);
    ASSERT_EQ(args.size(), 6u);
    EXPECT_EQ(args[0], "run");
    EXPECT_EQ(args[1], c.workload);
    EXPECT_EQ(args[2], "--db");
    EXPECT_EQ(args[3], c.db.string());  // readable in `ps`; the document has it too
    EXPECT_EQ(args[4], "--rank-config");
    EXPECT_EQ(args[5].find_first_not_of("0123456789abcdef"), std::string::npos);
    const RunConfig back = from_flags({args.begin() + 1, args.end()}, "ignored: the document has it");
    const RunConfig defaults;
    c.nproc = defaults.nproc;
    c.hosts = defaults.hosts;
    c.hostfile = defaults.hostfile;
    c.mca = defaults.mca;
    expect_same(back, c);
  }
  EXPECT_THROW(session::decode_document("7b7"), std::invalid_argument);
  EXPECT_THROW(session::decode_document("zz"), std::invalid_argument);
  EXPECT_THROW(session::config_from_document(json::object()), std::invalid_argument);
}

// The stored config (config_json) as the reports, `show` and the viewer read it.
TEST(RunOptions, StoredConfigKeepsItsKeys) {
  session::StoredFacts facts;
  facts.batch = 48;
  facts.threads = 5;
  facts.units = {{"samples", "pairs"}};
  facts.preset_table = {{"layers", "2"}};
  facts.distributed = {{"ranks", 4}, {"strategy", "data_parallel_allreduce"}};
  const json stored = session::stored_config(all_reduce_config(), facts);
  const json expected = {{"workload", "seq2seq"},
                         {"preset", "small"},
                         {"device", "cuda:1"},
                         {"data", "fashion-mnist:/data/fm"},
                         {"shard", "1/3"},
                         {"batch", 48},
                         {"learners", 6},
                         {"iterations", 123},
                         {"warmup", 7},
                         {"threads", 5},
                         {"seed", 18446744073709551615ull},
                         {"eval_batches", 9},
                         {"eval_every", 11},
                         {"quality_target", 0.875},
                         {"trace", false},
                         {"roofline", true},
                         {"units", {{"samples", "pairs"}}},
                         {"preset_table", {{"layers", "2"}}},
                         {"suite", {{"name", "nightly"}, {"entry", 3}, {"repeat", 2}}},
                         {"distributed",
                          {{"ranks", 4},
                           {"strategy", "data_parallel_allreduce"},
                           {"bucket_mb", 0.25},
                           {"overlap", false},
                           {"bucket_order", "reverse_registration"},
                           {"priority", true},
                           {"partition_mb", 0.125},
                           {"cross_barrier", false},
                           {"gpu_gradients", "nccl"}}}};
  EXPECT_EQ(stored, expected) << stored.dump(2);

  const json on_ps = session::stored_config(ps_config(), facts);
  EXPECT_EQ(on_ps.at("distributed"), json({{"ranks", 4},
                                           {"strategy", "data_parallel_allreduce"},
                                           {"mode", "bounded"},
                                           {"staleness", 4},
                                           {"priority", true},
                                           {"chunk_mb", 0.5},
                                           {"server_hosts", "s1:2,s2:1"}}))
      << on_ps.dump(2);

  // A single process stores no distribution; unset and default options are left out.
  RunConfig plain;
  plain.workload = "mlp";
  const json single = session::stored_config(plain, {.batch = 8, .threads = 2});
  // cross_barrier is stored as taken: only with priority.
  EXPECT_EQ(session::stored_config(plain, facts).at("distributed").at("cross_barrier"), false);
  EXPECT_FALSE(single.contains("distributed"));
  EXPECT_FALSE(single.contains("learners"));
  EXPECT_FALSE(single.contains("eval_every"));
  EXPECT_FALSE(single.contains("quality_target"));
  EXPECT_FALSE(single.contains("suite"));
  EXPECT_EQ(single.at("batch"), 8);
}
