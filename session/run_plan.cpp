#include "session/run_plan.h"

#include <tuple>

#include <algorithm>
#include <stdexcept>

#include "distributed/gpu_assignment.h"
#include "engine/device.h"

namespace ts::session {

namespace {

const workloads::WorkloadSpec& spec_of(const RunConfig& c) {
  const auto* spec = workloads::find_workload(c.workload);
  if (!spec) throw std::runtime_error("unknown workload '" + c.workload + "'");
  return *spec;
}

const workloads::Preset& preset_of(const workloads::WorkloadSpec& spec, const RunConfig& c) {
  const auto* preset = spec.preset(c.preset);
  if (!preset) throw std::runtime_error("unknown preset '" + c.preset + "' for " + c.workload);
  return *preset;
}

// The topology of a distributed run, for the stored config (the strategy's options themselves
// are stored from their declarations, session/run_options.h).
nlohmann::json distributed_facts(const RunConfig& c, int64_t batch) {
  const int ranks = static_cast<int>(c.nproc);
  if (c.strategy == RunConfig::Strategy::ps) {
    const auto topology = distributed::ps::Topology::of(ranks, c.ps);
    return {{"ranks", ranks},
            {"global_batch", batch * topology.workers},
            {"strategy", "parameter_server"},
            {"backend", "mpi"},
            {"workers", topology.workers},
            {"servers", topology.servers},
            {"server_placement", topology.dedicated ? "dedicated ranks" : "co-located with workers 0..S-1"},
            {"batch_norm_statistics", "per worker (not synchronised)"}};
  }
  return {{"ranks", ranks},
          {"global_batch", batch * ranks},
          {"strategy", "data_parallel_allreduce"},
          {"backend", "mpi"},
          {"batch_norm_statistics", "per rank (not synchronised), as PyTorch DDP's default"}};
}

store::RunInfo run_info(const RunPlan& p) {
  const RunConfig& c = p.resolved;
  store::RunInfo info;
  info.workload = c.workload;
  info.preset = c.preset;
  info.device = c.device;
  info.batch_size = *c.batch;
  info.ranks = p.ranks;
  info.global_batch_size = info.batch_size * p.workers;
  info.iterations = c.iterations;
  info.warmup = c.warmup;
  info.threads = p.threads;
  info.seed = c.seed;
  info.trace = c.trace;
  info.command_line = c.command_line;
  info.heartbeat_interval_ms = c.flush_interval.count();
  info.config_json = stored_config(c, stored_facts(c)).dump();
  return info;
}

}  // namespace

RunPlan plan_run(const RunConfig& c, const distributed::World* world, int64_t cores, int gpus) {
  const auto& spec = spec_of(c);
  preset_of(spec, c);  // an unknown preset stops the plan here
  RunPlan p;
  p.rank = world ? world->rank : 0;
  p.ranks = world ? world->size : 1;
  p.distributed = p.ranks > 1;
  p.writes_db = p.rank == 0;
  // A parameter server: workers are ranks 0..W-1; dedicated servers, if any, the ranks after.
  p.on_ps = p.distributed && c.strategy == RunConfig::Strategy::ps;
  if (p.on_ps) {
    try {
      p.topology = distributed::ps::Topology::of(p.ranks, c.ps);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(std::string("parameter server: ") + e.what());
    }
  }
  p.trains = !p.on_ps || p.topology.is_worker(p.rank);
  p.workers = p.on_ps ? p.topology.workers : p.ranks;
  // A rank's share of its host's cores unless told.
  const int local = world ? std::max(1, world->local_size) : 1;
  p.threads = static_cast<int>(c.threads > 0 ? c.threads : std::max<int64_t>(1, cores / local));

  p.resolved = c;
  p.resolved.batch = spec.batch_of(c.preset, c.batch);
  p.resolved.threads = p.threads;
  p.resolved.nproc = p.ranks;
  p.units = spec.units;

  auto& wc = p.workload;
  wc.preset = c.preset;
  wc.device = engine::parse_device(c.device);
  if (p.distributed && world && wc.device.type == engine::DeviceType::cuda && c.device == "cuda" && gpus > 0) {
    wc.device.index = distributed::shared_gpu_for_rank(world->local_rank, gpus);
  }
  wc.batch = *p.resolved.batch;
  wc.learners = c.learners.value_or(0);
  wc.seed = c.seed;
  wc.data = c.data;
  wc.rank = p.trains ? p.rank : 0;                   // a dedicated server builds worker 0's model: the same parameters
  if (!p.trains) wc.device = engine::Device::cpu();  // ... for their sizes only: the servers hold values on the CPU
  wc.world_size = p.workers;
  if (!p.distributed && !c.shard.empty()) {  // one process reading one rank's data (checked by the cli)
    if (const auto shard = parse_shard(c.shard)) std::tie(wc.rank, wc.world_size) = *shard;
  }

  p.info = run_info(p);
  return p;
}

StoredFacts stored_facts(const RunConfig& c) {
  const auto& spec = spec_of(c);
  const auto& preset = preset_of(spec, c);
  StoredFacts facts;
  facts.batch = spec.batch_of(c.preset, c.batch);
  facts.threads = c.threads;
  facts.units = {{"samples", spec.units.samples},
                 {"tokens", spec.units.tokens},
                 {"batch", spec.units.batch},
                 {"headline", spec.units.tokens_headline ? "tokens" : "samples"}};
  for (const auto& [k, v] : preset.table) facts.preset_table[k] = v;
  if (c.nproc > 1) facts.distributed = distributed_facts(c, facts.batch);
  return facts;
}

void add_rank_hosts(RunPlan& plan, const std::vector<std::string>& hosts) {
  nlohmann::json cfg = nlohmann::json::parse(plan.info.config_json);
  cfg["distributed"]["rank_hosts"] = hosts;
  plan.info.config_json = cfg.dump();
}

}  // namespace ts::session
