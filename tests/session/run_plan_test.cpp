// The plan (session/run_plan.h): a pure function of the config and the rank's place. The batch
// is resolved once (the workload and the run row see the same), threads are the rank's share of
// its host, a parameter server's topology decides who trains, and the stored config says all of
// it without ranks or a db.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "nlohmann/json.hpp"
#include "session/run_options.h"
#include "session/run_plan.h"
#include "workloads/workload.h"

using nlohmann::json;
using ts::distributed::World;
using ts::session::plan_run;
using ts::session::RunConfig;
using ts::session::RunPlan;
using ts::session::stored_config;
using ts::session::stored_facts;

namespace {

RunConfig resnet() {
  RunConfig c;
  c.workload = "resnet50";
  c.preset = "tiny";
  c.iterations = 7;
  c.warmup = 2;
  c.seed = 11;
  c.command_line = "trainscope run resnet50";
  return c;
}

int64_t default_batch() { return ts::workloads::find_workload("resnet50")->preset("tiny")->default_batch; }

}  // namespace

TEST(RunPlan, ASingleProcessResolvesTheBatchAndTakesEveryCore) {
  const RunPlan p = plan_run(resnet(), nullptr, 6);
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.ranks, 1);
  EXPECT_FALSE(p.distributed);
  EXPECT_TRUE(p.writes_db);
  EXPECT_TRUE(p.trains);
  EXPECT_EQ(p.threads, 6);
  // One batch for all: the workload is handed the batch the plan resolved, never an unset one.
  EXPECT_EQ(p.workload.batch, default_batch());
  EXPECT_EQ(p.info.batch_size, default_batch());
  EXPECT_EQ(p.info.global_batch_size, default_batch());
  EXPECT_EQ(p.info.threads, 6);
  EXPECT_EQ(p.info.iterations, 7);
  EXPECT_EQ(p.info.seed, 11u);
  EXPECT_EQ(p.info.heartbeat_interval_ms, 2000);
  EXPECT_TRUE(p.info.started_at.empty());  // stamped when the row begins, not planned
  const json cfg = json::parse(p.info.config_json);
  EXPECT_EQ(cfg["batch"], default_batch());
  EXPECT_EQ(cfg["threads"], 6);
  EXPECT_EQ(cfg["units"]["headline"], "samples");
  EXPECT_TRUE(cfg["preset_table"].is_object());
  EXPECT_FALSE(cfg.contains("distributed"));
  EXPECT_FALSE(cfg.contains("learners"));
}

TEST(RunPlan, TheUsersBatchAndThreadsWin) {
  RunConfig c = resnet();
  c.batch = 3;
  c.threads = 2;
  const RunPlan p = plan_run(c, nullptr, 16);
  EXPECT_EQ(p.threads, 2);
  EXPECT_EQ(p.workload.batch, 3);
  EXPECT_EQ(p.info.batch_size, 3);
  EXPECT_EQ(json::parse(p.info.config_json)["batch"], 3);
}

TEST(RunPlan, ARankSharesItsHostAndOnlyRankZeroWrites) {
  const World world{.rank = 1, .size = 4, .local_rank = 1, .local_size = 2};
  const RunPlan p = plan_run(resnet(), &world, 8);
  EXPECT_TRUE(p.distributed);
  EXPECT_FALSE(p.writes_db);
  EXPECT_EQ(p.threads, 4);
  EXPECT_EQ(p.workload.rank, 1);
  EXPECT_EQ(p.workload.world_size, 4);
  EXPECT_EQ(p.info.ranks, 4);
  EXPECT_EQ(p.info.global_batch_size, 4 * default_batch());
  const json d = json::parse(p.info.config_json)["distributed"];
  EXPECT_EQ(d["strategy"], "data_parallel_allreduce");
  EXPECT_EQ(d["ranks"], 4);
  EXPECT_EQ(d["global_batch"], 4 * default_batch());
}

// `--device cuda` over several ranks spreads a host's ranks over its GPUs in turn; `cuda:N` pins
// every rank to GPU N; one process keeps its device as given.
TEST(RunPlan, GpuRanksSpreadOverTheHostsGpus) {
  RunConfig c = resnet();
  c.device = "cuda";
  const World third{.rank = 3, .size = 4, .local_rank = 3, .local_size = 4};
  EXPECT_EQ(plan_run(c, &third, 8, 2).workload.device.index, 1);
  EXPECT_EQ(plan_run(c, &third, 8, 8).workload.device.index, 3);
  EXPECT_EQ(plan_run(c, &third, 8, 1).workload.device.index, 0);
  c.device = "cuda:1";
  EXPECT_EQ(plan_run(c, &third, 8, 2).workload.device.index, 1);
  c.device = "cuda";
  EXPECT_EQ(plan_run(c, nullptr, 8, 2).workload.device.index, 0);
}

TEST(RunPlan, ADedicatedServerRankServesWorkerZerosModel) {
  RunConfig c = resnet();
  c.strategy = RunConfig::Strategy::ps;
  c.ps.servers = 1;
  c.ps.dedicated = true;
  const World world{.rank = 2, .size = 3, .local_rank = 2, .local_size = 3};
  const RunPlan p = plan_run(c, &world, 3);
  EXPECT_TRUE(p.on_ps);
  EXPECT_FALSE(p.trains);
  EXPECT_EQ(p.workers, 2);
  EXPECT_EQ(p.workload.rank, 0);
  EXPECT_EQ(p.workload.world_size, 2);
  EXPECT_EQ(p.info.global_batch_size, 2 * default_batch());
  const json d = json::parse(p.info.config_json)["distributed"];
  EXPECT_EQ(d["strategy"], "parameter_server");
  EXPECT_EQ(d["workers"], 2);
  EXPECT_EQ(d["servers"], 1);
  EXPECT_EQ(d["server_placement"], "dedicated ranks");
  // GPU workers: the server builds the model for its sizes on the CPU, where it holds the values.
  c.device = "cuda";
  EXPECT_TRUE(plan_run(c, &world, 3, 1).workload.device.is_cpu());
  const World worker{.rank = 1, .size = 3, .local_rank = 1, .local_size = 3};
  EXPECT_EQ(plan_run(c, &worker, 3, 1).workload.device.type, ts::engine::DeviceType::cuda);
}

TEST(RunPlan, APlacementTheRanksCannotHoldIsRefused) {
  RunConfig c = resnet();
  c.strategy = RunConfig::Strategy::ps;
  c.ps.servers = 2;
  c.ps.dedicated = true;
  const World world{.rank = 0, .size = 2, .local_rank = 0, .local_size = 2};
  try {
    plan_run(c, &world, 2);
    FAIL() << "planned a job with no worker";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter server: "), std::string::npos) << e.what();
  }
}

TEST(RunPlan, ThePlanIsPure) {
  RunConfig c = resnet();
  c.eval_every = 3;
  c.quality_target = 0.5;
  c.suite = {"nightly", 2, 1};
  const World world{.rank = 0, .size = 2, .local_rank = 0, .local_size = 1};
  const RunPlan a = plan_run(c, &world, 4), b = plan_run(c, &world, 4);
  EXPECT_EQ(a.info.config_json, b.info.config_json);
  EXPECT_EQ(a.threads, b.threads);
  const json cfg = json::parse(a.info.config_json);
  EXPECT_EQ(cfg["eval_every"], 3);
  EXPECT_EQ(cfg["quality_target"], 0.5);
  EXPECT_EQ(cfg["suite"], (json{{"name", "nightly"}, {"entry", 2}, {"repeat", 1}}));
  // The stored config is a function of the resolved config alone.
  EXPECT_EQ(stored_config(a.resolved, stored_facts(a.resolved)).dump(), a.info.config_json);
}

TEST(RunPlan, TheRanksHostsJoinTheStoredConfig) {
  const World world{.rank = 0, .size = 2, .local_rank = 0, .local_size = 2};
  RunPlan p = plan_run(resnet(), &world, 2);
  ts::session::add_rank_hosts(p, {"a", "b"});
  const json d = json::parse(p.info.config_json)["distributed"];
  EXPECT_EQ(d["rank_hosts"], (json{"a", "b"}));
  EXPECT_EQ(d["strategy"], "data_parallel_allreduce");
}

TEST(RunPlan, AnUnknownWorkloadIsRefused) {
  RunConfig c = resnet();
  c.workload = "nope";
  EXPECT_THROW(plan_run(c, nullptr, 1), std::runtime_error);
}

// `--shard R/N` (a projection's source): one process reads rank R of N's data; without it, all of
// it; and the stored config keeps it.
TEST(RunPlan, AShardedSingleProcessReadsThatRanksData) {
  RunConfig c = resnet();
  EXPECT_EQ(plan_run(c, nullptr, 4).workload.rank, 0);
  EXPECT_EQ(plan_run(c, nullptr, 4).workload.world_size, 1);
  c.shard = "1/3";
  const RunPlan p = plan_run(c, nullptr, 4);
  EXPECT_EQ(p.workload.rank, 1);
  EXPECT_EQ(p.workload.world_size, 3);
  EXPECT_EQ(json::parse(p.info.config_json).value("shard", std::string()), "1/3");
  EXPECT_FALSE(ts::session::parse_shard("3/3"));
  EXPECT_FALSE(ts::session::parse_shard("1/3x"));
  EXPECT_EQ(ts::session::parse_shard("0/2"), (std::pair<int, int>{0, 2}));
}
